package agentfile

import (
	"encoding/json"
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
)

// checkResponseSchema checks approval.response_schema: the schema of the
// value a person answers a pause of interrupt_before with (an edit's
// value, a resume value), either the name of a schema under schemas:
// (chains) or an inline schema. An inline one is compiled here, so a bad
// one is an error when the file loads; a schema file named under
// schemas: is read and compiled with the others when the file is
// prepared (Check).
func (a *File) checkResponseSchema() error {
	n := a.Approval.ResponseSchema
	if n.Kind == 0 {
		return nil
	}
	line := a.keyLines["approval"]
	if len(a.InterruptBefore) == 0 {
		return &FileError{File: a.Path, Line: line, Msg: "approval.response_schema needs interrupt_before: steps to pause before"}
	}
	if n.Kind == yaml.ScalarNode {
		ref, ok := a.Schemas[n.Value]
		if !ok {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("approval.response_schema: unknown schema %q (declare it under schemas:, or write the schema inline)", n.Value)}
		}
		if ref.Kind == yaml.ScalarNode {
			return nil // a schema file: read when the file is prepared
		}
		n, line = *ref, ref.Line+1
	}
	if _, err := inlineSchema(&n); err != nil {
		return &FileError{File: a.Path, Line: line, Msg: "approval.response_schema: " + err.Error(), Err: err}
	}
	return nil
}

// inlineSchema is an inline schema (a YAML mapping) as checked JSON.
func inlineSchema(n *yaml.Node) (json.RawMessage, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: want a schema name or an inline schema (a mapping)", flow.ErrInvalidSchema)
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", flow.ErrInvalidSchema, err)
	}
	b, err := json.Marshal(agent.YAMLValue(v))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", flow.ErrInvalidSchema, err)
	}
	if err := flow.CheckResponseSchema(b); err != nil {
		return nil, err
	}
	return b, nil
}

// responseSchemas are the runner's schemas of the pauses before the
// file's interrupt_before nodes (flow.Options.ResponseSchemas); schemas
// are the file's compiled schemas: (loadSchemas).
func (a *File) responseSchemas(schemas map[string]*agent.Schema) (map[string]json.RawMessage, error) {
	n := a.Approval.ResponseSchema
	if n.Kind == 0 {
		return nil, nil
	}
	var doc json.RawMessage
	if s, ok := schemas[n.Value]; ok && n.Kind == yaml.ScalarNode {
		doc = s.JSON
	} else {
		b, err := inlineSchema(&n)
		if err != nil {
			return nil, &FileError{File: a.Path, Line: a.keyLines["approval"], Msg: "approval.response_schema: " + err.Error(), Err: err}
		}
		doc = b
	}
	out := map[string]json.RawMessage{}
	for _, id := range a.InterruptBefore {
		out[id] = doc
	}
	return out, nil
}
