package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/cairn-dev/cairn/store"
)

// ErrInvalidSchema: an interrupt's response schema (WithResponseSchema,
// Options.ResponseSchemas) is not a valid JSON Schema.
var ErrInvalidSchema = errors.New("flow: invalid response schema")

// InterruptOption configures an Interrupt.
type InterruptOption func(*interruptOptions)

type interruptOptions struct {
	schema any
}

// WithResponseSchema says which answer the interrupt expects: a JSON
// Schema (any draft; a json.RawMessage, a map, or any value that encodes
// as one) that the resume value must validate against. The schema is
// stored with the pause (its response_schema, shown wherever the
// interrupt is) and Resume refuses a value that does not fit with a
// *ResponseError, changing nothing. A schema that is not valid makes
// Interrupt return an error wrapping ErrInvalidSchema.
func WithResponseSchema(schema any) InterruptOption {
	return func(o *interruptOptions) { o.schema = schema }
}

// ResponseError is an answer to a pause that does not fit the pause's
// response schema. It wraps store.ErrInvalidArgument.
type ResponseError struct {
	// Node is the node the pause is at.
	Node string
	// Path is where in the answer the first failure is (JSON Pointer
	// tokens; empty: the answer itself).
	Path []string
	Msg  string
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("flow: the answer to %q at %s does not fit its response_schema: %s", e.Node, e.JSONPath("$"), e.Msg)
}

// Unwrap makes errors.Is(err, store.ErrInvalidArgument) true.
func (e *ResponseError) Unwrap() error { return store.ErrInvalidArgument }

// JSONPath is the failure's place under root ("$", "$.command.resume"):
// root.field[0].
func (e *ResponseError) JSONPath(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, tok := range e.Path {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
		} else if tok != "" && !strings.ContainsAny(tok, ".[]'\" ") {
			b.WriteString("." + tok)
		} else {
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}

// compileSchema compiles a response schema, given as any value that
// encodes as JSON, and returns it compacted.
func compileSchema(schema any) (json.RawMessage, *jsonschema.Schema, error) {
	doc, ok := schema.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
		}
		doc = b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	c := jsonschema.NewCompiler()
	const url = "mem://cairn/response_schema.json"
	if err := c.AddResource(url, v); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return buf.Bytes(), compiled, nil
}

// CheckResponseSchema reports whether schema is a valid JSON Schema (an
// error wrapping ErrInvalidSchema if not), for loaders that take one from
// a file.
func CheckResponseSchema(schema json.RawMessage) error {
	_, _, err := compileSchema(schema)
	return err
}

// pausePayload is the stored payload of a pause (store.Meta.Interrupt):
// a node's interrupt {node, value} or a static pause {before|after,
// node}, each with its response_schema when it has one.
type pausePayload struct {
	Node           string          `json:"node"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
}

// ResponseSchemaOf is the response schema of the pause a checkpoint
// stopped at (nil: none).
func ResponseSchemaOf(cp store.Checkpoint) json.RawMessage {
	if !pausedAt(cp) {
		return nil
	}
	var p pausePayload
	if json.Unmarshal(cp.Meta.Interrupt, &p) != nil {
		return nil
	}
	return p.ResponseSchema
}

// CheckResponse checks an answer to the pause at head against the
// pause's response schema: a *ResponseError if it does not fit, nil if
// it does or the pause has none. The answer is a resume value (any value
// that encodes as JSON; json.RawMessage as it is) or an Approval, whose
// Value is what is checked (an approval without one passes).
func CheckResponse(head store.Checkpoint, answer any) error {
	schema := ResponseSchemaOf(head)
	if schema == nil || answer == nil {
		return nil
	}
	var doc json.RawMessage
	switch a := answer.(type) {
	case json.RawMessage:
		doc = a
	default:
		if ap, ok := approvalOf(answer); ok {
			if len(ap.Value) == 0 {
				return nil
			}
			doc = ap.Value
			break
		}
		b, err := json.Marshal(answer)
		if err != nil {
			return fmt.Errorf("%w: resume value: %v", store.ErrInvalidArgument, err)
		}
		doc = b
	}
	_, compiled, err := compileSchema(schema)
	if err != nil {
		return err // stored by an older build that did not check; say so
	}
	return validateResponse(compiled, InterruptNodeOf(head), doc)
}

// validateResponse validates doc, reporting its first failure.
func validateResponse(s *jsonschema.Schema, node string, doc json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &ResponseError{Node: node, Msg: "not JSON: " + err.Error()}
	}
	err = s.Validate(v)
	var ve *jsonschema.ValidationError
	if err == nil {
		return nil
	}
	if !errors.As(err, &ve) {
		return &ResponseError{Node: node, Msg: err.Error()}
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	return &ResponseError{Node: node, Path: leaf.InstanceLocation, Msg: leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))} // "minimum: got 0, want 1"
}

// InterruptNodeOf is the node the pause at cp is at ("" for none).
func InterruptNodeOf(cp store.Checkpoint) string {
	var p pausePayload
	_ = json.Unmarshal(cp.Meta.Interrupt, &p)
	return p.Node
}

// staticPayload is the payload of a pause before or after node (kind
// "before" or "after"), with the node's response schema
// (Options.ResponseSchemas, else carried, the schema of the pause an
// update at a pause keeps) when it has one.
func (r *Runner) staticPayload(kind, node string, carried json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{kind: mustJSON(node), "node": mustJSON(node)}
	if s := r.opts.ResponseSchemas[node]; s != nil {
		m["response_schema"] = s
	} else if carried != nil {
		m["response_schema"] = carried
	}
	b, _ := json.Marshal(m)
	return b
}

// compileSchemas checks Options.ResponseSchemas: known nodes, valid
// schemas, kept compacted in a map of the runner's own.
func compileSchemas(g *Compiled, in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(in))
	for node, s := range in {
		if g.nodes[node] == nil {
			return nil, fmt.Errorf("%w: response schema of unknown node %q", ErrInvalidGraph, node)
		}
		doc, _, err := compileSchema(s)
		if err != nil {
			return nil, fmt.Errorf("the response schema of the pauses at %q: %w", node, err)
		}
		out[node] = doc
	}
	return out, nil
}
