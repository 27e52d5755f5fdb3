package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// typedState, typedConfig and typedContext are a Go graph's types, as a
// LangGraph app declares its state, config and context schemas.
type typedState struct {
	Count int      `json:"count"`
	Notes []string `json:"notes"`
}

type typedConfig struct {
	ModelName string `json:"model_name"`
}

type typedContext struct {
	Org string `json:"org"`
}

// TestSchemasFromTypes: a Go graph's schemas come from its reducers and
// its Go types — typed state fields, a messages field as LangGraph marks
// it, config and context schemas — in draft 07; a graph without types
// still types what its reducers say.
func TestSchemasFromTypes(t *testing.T) {
	schema := state.MustSchema(state.WithField("count", state.ReducerAdd), state.WithField("notes", state.ReducerAppend),
		state.WithField("messages", state.ReducerMessages), state.WithField("free", state.ReducerReplace))
	g, err := flow.NewGraph(schema).AddNode("n", func(context.Context, state.Doc) (state.Update, error) { return nil, nil }).
		AddEdge(flow.START, "n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	typed := &runs.Graph{ID: "typed", Graph: g, Types: runs.GraphTypes{State: typedState{}, Config: typedConfig{}, Context: &typedContext{}}}
	plain := &runs.Graph{ID: "plain", Graph: g}
	literal := &runs.Graph{ID: "literal", Graph: g, Types: runs.GraphTypes{
		Config: map[string]any{"type": "object", "properties": map[string]any{"model": map[string]any{"type": "string", "enum": []string{"anthropic", "openai"}}}},
		State:  json.RawMessage(`{"type": "object", "properties": {"free": {"type": "array", "langgraph_type": "messages"}}}`)}}
	ts0 := newServer(t, inmem.Open(store.Options{}), typed, plain, literal)
	type doc = map[string]any
	get := func(id string) doc { return ts0.json("GET", "/assistants/"+id+"/schemas", nil, 200) }
	prop := func(d doc, schema, field string) doc {
		p, _ := d[schema].(doc)["properties"].(doc)[field].(doc)
		return p
	}
	ts, ps, ls := get("typed"), get("plain"), get("literal")
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"typed count", prop(ts, "state_schema", "count")["type"], "integer"},
		{"typed notes (a nil slice is null)", prop(ts, "state_schema", "notes")["type"], []string{"null", "array"}},
		{"messages marked", prop(ts, "state_schema", "messages")["langgraph_type"], "messages"},
		{"untyped free field", len(prop(ts, "state_schema", "free")), 0},
		{"config", prop(ts, "config_schema", "model_name")["type"], "string"},
		{"context", prop(ts, "context_schema", "org")["type"], "string"},
		{"draft 07", ts["config_schema"].(doc)["$schema"], "http://json-schema.org/draft-07/schema#"},
		{"input is the state", prop(ts, "input_schema", "count")["type"], "integer"},
		{"reducer add", prop(ps, "state_schema", "count")["type"], "number"},
		{"reducer append", prop(ps, "state_schema", "notes")["type"], "array"},
		{"no config type", ps["config_schema"], nil},
		{"a schema given as is: enum", prop(ls, "config_schema", "model")["enum"], []string{"anthropic", "openai"}},
		{"a schema given as is: langgraph_type", prop(ls, "state_schema", "free")["langgraph_type"], "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if b, _ := json.Marshal(tc.got); string(b) != func() string { w, _ := json.Marshal(tc.want); return string(w) }() {
				t.Fatalf("got %s, want %v", b, tc.want)
			}
		})
	}
	if defs, _ := ts["state_schema"].(doc)["definitions"].(doc); defs["BaseMessage"] == nil {
		t.Fatalf("no message definitions: %v", ts["state_schema"])
	}
}

// TestInputThroughInputType: a graph with an input type reads a run's
// input through it, as LangGraph reads input through its input schema:
// keys outside it are dropped, not stored; without one, every key is kept.
func TestInputThroughInputType(t *testing.T) {
	schema := state.MustSchema(state.WithField("count", state.ReducerAdd))
	g, err := flow.NewGraph(schema).AddNode("n", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"count": 1}, nil }).
		AddEdge(flow.START, "n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	type base struct {
		Count int `json:"count"`
	}
	type input struct {
		base // embedded: its fields are the input's, as encoding/json reads them
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "typed", Graph: g, Types: runs.GraphTypes{Input: input{}}}, &runs.Graph{ID: "open", Graph: g})
	for _, tc := range []struct {
		id, want string
	}{{"typed", `map[count:3]`}, {"open", `map[count:3 extra:x]`}} {
		t.Run(tc.id, func(t *testing.T) {
			out := ts.json("POST", "/runs/wait", map[string]any{"assistant_id": tc.id, "input": map[string]any{"count": 2, "extra": "x"}}, 200)
			if got := fmt.Sprint(out); got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
		})
	}
}
