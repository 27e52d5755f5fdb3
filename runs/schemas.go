package runs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/google/jsonschema-go/jsonschema"
)

// Schemas are an assistant's JSON Schemas (GET /assistants/{id}/schemas),
// in draft 07 as LangGraph serves them; nil when unknown.
type Schemas struct {
	Input, Output, State, Config, Context map[string]any
}

// draft07 is the dialect the schemas name, as LangGraph's do.
const draft07 = "http://json-schema.org/draft-07/schema#"

// messageRef names the message definition a messages field's items use.
const messageRef = "#/definitions/BaseMessage"

// messageDefinitions define a LangGraph message as a client sends or reads
// it: a type and a content, with a role's own fields.
func messageDefinitions() map[string]any {
	str := map[string]any{"type": "string"}
	content := map[string]any{"anyOf": []any{str, map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}}
	msg := func(typ string, extra map[string]any) map[string]any {
		props := map[string]any{"type": map[string]any{"type": "string", "const": typ}, "content": content, "id": str, "name": str,
			"additional_kwargs": map[string]any{"type": "object"}, "response_metadata": map[string]any{"type": "object"}}
		for k, v := range extra {
			props[k] = v
		}
		return map[string]any{"type": "object", "properties": props, "required": []string{"type", "content"}}
	}
	toolCall := map[string]any{"type": "object", "properties": map[string]any{"id": str, "name": str, "args": map[string]any{"type": "object"}}, "required": []string{"name", "args"}}
	return map[string]any{
		"BaseMessage": map[string]any{"oneOf": []any{
			map[string]any{"$ref": "#/definitions/HumanMessage"}, map[string]any{"$ref": "#/definitions/AIMessage"},
			map[string]any{"$ref": "#/definitions/ToolMessage"}, map[string]any{"$ref": "#/definitions/SystemMessage"}}},
		"HumanMessage":  msg("human", nil),
		"AIMessage":     msg("ai", map[string]any{"tool_calls": map[string]any{"type": "array", "items": toolCall}, "usage_metadata": map[string]any{"type": "object"}}),
		"ToolMessage":   msg("tool", map[string]any{"tool_call_id": str, "status": map[string]any{"enum": []string{"success", "error"}}}),
		"SystemMessage": msg("system", nil),
	}
}

// messagesProperty is a messages field's schema: a list of messages,
// marked as LangGraph marks them (langgraph_type), so front ends know it
// is the conversation.
func messagesProperty() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"$ref": messageRef}, "langgraph_type": "messages"}
}

// reducerProperty is what a field's reducer says of its values.
func reducerProperty(reducer string) map[string]any {
	switch reducer {
	case state.ReducerMessages:
		return messagesProperty()
	case state.ReducerAppend:
		return map[string]any{"type": "array"}
	case state.ReducerAdd:
		return map[string]any{"type": "number"}
	case state.ReducerMerge:
		return map[string]any{"type": "object"}
	}
	return map[string]any{}
}

// stateSchema is an object schema of the fields, each from its reducer
// and, where typed gives one, from its Go type (a messages field keeps
// its message schema).
func stateSchema(title string, s *state.Schema, typed map[string]any) map[string]any {
	props := map[string]any{}
	messages := false
	for _, f := range s.Fields() {
		p := reducerProperty(s.Reducer(f))
		if t, ok := typed[f].(map[string]any); ok && s.Reducer(f) != state.ReducerMessages {
			p = t
		}
		messages = messages || s.Reducer(f) == state.ReducerMessages
		props[f] = p
	}
	out := map[string]any{"$schema": draft07, "title": title, "type": "object", "properties": props}
	if messages {
		out["definitions"] = messageDefinitions()
	}
	return out
}

// typeSchema is the JSON Schema of a Go value's type (a struct: an
// object of its JSON fields), in draft 07; nil for nil. A value that is a
// schema already — a *jsonschema.Schema, a json.RawMessage, or a
// map[string]any — is the schema itself (enums, descriptions,
// langgraph_type: what a Go type cannot say).
func typeSchema(title string, v any) (map[string]any, error) {
	var b []byte
	var err error
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		b = x
	case map[string]any, *jsonschema.Schema:
		b, err = json.Marshal(x)
	default:
		b, err = goTypeSchema(v)
	}
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("schema %s: want a JSON object: %w", title, err)
	}
	out["$schema"], out["title"] = draft07, cmp.Or(stringOf(out["title"]), title)
	return out, nil
}

// goTypeSchema is the schema jsonschema-go infers from a value's type,
// open to other members as LangGraph's are.
func goTypeSchema(v any) ([]byte, error) {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{IgnoreInvalidTypes: true})
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	s.AdditionalProperties = nil
	return json.Marshal(s)
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// chatSchemas are a chat assistant's: its state, input and output are the
// conversation.
func chatSchemas(title string) Schemas {
	st := map[string]any{"$schema": draft07, "title": title, "type": "object",
		"properties": map[string]any{"messages": messagesProperty()}, "definitions": messageDefinitions()}
	return Schemas{Input: st, Output: st, State: st}
}

// GraphTypes are Go values whose types describe a Graph's schemas (each
// may be nil): State's JSON fields type the state's fields; Input and
// Output the run's input and output (default: the state) — a run's input
// keeps only Input's fields, as LangGraph reads input through its input
// schema; Config the run's config.configurable; Context its context.
// Subgraphs type the state of the graph's subgraphs
// (flow.Graph.AddSubgraph), by subgraph node name (theirs in turn by
// their Subgraphs).
type GraphTypes struct {
	State, Input, Output, Config, Context any
	Subgraphs                             map[string]GraphTypes
}

// Schemas implements the schemas of a Go graph: its state's fields from
// their reducers and Types.
func (g *Graph) Schemas() (Schemas, error) {
	c := g.drawing()
	if c == nil {
		return Schemas{}, nil
	}
	var typed map[string]any
	st, err := typeSchema(g.ID, g.Types.State)
	if err != nil {
		return Schemas{}, err
	}
	if st != nil {
		typed, _ = st["properties"].(map[string]any)
	}
	out := Schemas{State: stateSchema(g.ID, c.Schema(), typed)}
	for _, x := range []struct {
		dst   *map[string]any
		title string
		v     any
	}{{&out.Input, g.ID + "_input", g.Types.Input}, {&out.Output, g.ID + "_output", g.Types.Output},
		{&out.Config, g.ID + "_config", g.Types.Config}, {&out.Context, g.ID + "_context", g.Types.Context}} {
		if *x.dst, err = typeSchema(x.title, x.v); err != nil {
			return Schemas{}, err
		}
	}
	out.Input = cmpMap(out.Input, out.State)
	out.Output = cmpMap(out.Output, out.State)
	return out, nil
}

func cmpMap(a, b map[string]any) map[string]any {
	if a != nil {
		return a
	}
	return b
}

// AssistantSchemas are an assistant's schemas: a Go graph's from its
// types and reducers, a chat's the conversation, other files' their
// state fields.
func AssistantSchemas(a Assistant) (Schemas, error) {
	if s, ok := a.(interface{ Schemas() (Schemas, error) }); ok {
		return s.Schemas()
	}
	info := a.Info()
	if info.Kind == "chat" {
		return chatSchemas(info.ID), nil
	}
	props := map[string]any{}
	for _, f := range info.StateFields {
		props[f] = map[string]any{}
	}
	st := map[string]any{"$schema": draft07, "title": info.ID, "type": "object", "properties": props}
	out := Schemas{Input: st, Output: st, State: st}
	if info.Kind == "agent" {
		out.Input = map[string]any{"$schema": draft07, "title": "input", "description": "The agent's input: a string is text, anything else JSON"}
	}
	return out, nil
}

// inputFields are the JSON field names of a struct type's value, as
// encoding/json sees them (embedded structs' fields included): the
// properties of its schema. Nil for nil or a type with no properties.
func inputFields(v any) map[string]bool {
	sc, err := typeSchema("input", v)
	if err != nil || sc == nil {
		return nil
	}
	props, _ := sc["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	out := make(map[string]bool, len(props))
	for k := range props {
		out[k] = true
	}
	return out
}

// AssistantSubgraphs are the schemas of a Go graph's subgraphs
// (flow.Graph.AddSubgraph), by namespace as LangGraph names them: the
// subgraph node's name, nested ones joined with "|" when recurse. ns, when
// set, keeps that namespace and (recursing) those below it.
func AssistantSubgraphs(a Assistant, ns string, recurse bool) map[string]map[string]any {
	out := map[string]map[string]any{}
	g, ok := a.(*Graph)
	if !ok || g.drawing() == nil {
		return out
	}
	var walk func(c *flow.Compiled, prefix string, types GraphTypes)
	walk = func(c *flow.Compiled, prefix string, types GraphTypes) {
		for name, child := range c.Subgraphs() {
			key := name
			if prefix != "" {
				key = prefix + "|" + name
			}
			ct := types.Subgraphs[name]
			below := ns != "" && strings.HasPrefix(key, ns+"|")
			if (ns == "" && (prefix == "" || recurse)) || key == ns || (below && recurse) {
				st := stateSchema(name, child.Schema(), typedFields(name, ct.State))
				out[key] = map[string]any{"state": st, "input": st, "output": st, "config": nil}
			}
			if recurse || (ns != "" && strings.HasPrefix(ns, key+"|")) {
				walk(child, key, ct)
			}
		}
	}
	walk(g.drawing(), "", g.Types)
	return out
}

// typedFields are the properties of a state type's schema (nil when it
// has none, or does not make one: a Graph's own schemas report that).
func typedFields(title string, v any) map[string]any {
	st, err := typeSchema(title, v)
	if err != nil || st == nil {
		return nil
	}
	props, _ := st["properties"].(map[string]any)
	return props
}
