package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

const countSchema = `{"type": "object", "properties": {"count": {"type": "integer", "minimum": 1}}, "required": ["count"]}`

// askGraph asks for {count} with schema (a node's Interrupt), then stores
// the answer's count.
func askGraph(t *testing.T, schema any) *flow.Compiled {
	t.Helper()
	g, err := flow.NewGraph(state.MustSchema(state.WithField("count", state.ReducerReplace))).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			var a struct {
				Count int `json:"count"`
			}
			if err := flow.Interrupt(ctx, "how many?", &a, flow.WithResponseSchema(schema)); err != nil {
				return nil, err
			}
			return state.Update{"count": a.Count}, nil
		}).
		Chain("ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestResponseSchema stores a node's response schema with its pause and
// checks resume values against it: one that does not fit is refused
// with its path and the thread does not move; one that fits resumes.
func TestResponseSchema(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer any
		path   string // "" when the answer fits
	}{
		{name: "fits", answer: map[string]int{"count": 3}},
		{name: "raw fits", answer: json.RawMessage(`{"count": 2}`)},
		{name: "wrong type", answer: map[string]string{"count": "three"}, path: "$.count"},
		{name: "below minimum", answer: json.RawMessage(`{"count": 0}`), path: "$.count"},
		{name: "missing", answer: map[string]int{}, path: "$"},
		{name: "not an object", answer: 7, path: "$"},
		{name: "approval's value", answer: flow.Approval{Action: "edit", Value: json.RawMessage(`{"count": "x"}`)}, path: "$.count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := inmem.Open(store.Options{})
			r, err := flow.NewRunner(askGraph(t, json.RawMessage(countSchema)), s, flow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Invoke(ctx, "t", state.Update{})
			if err != nil || res.StopReason != state.StopInterrupt {
				t.Fatalf("invoke: %v %v", res.StopReason, err)
			}
			head, _ := s.Load(ctx, store.LoadRequest{Thread: "t"})
			var p struct {
				ResponseSchema json.RawMessage `json:"response_schema"`
			}
			if json.Unmarshal(head.Meta.Interrupt, &p) != nil || !strings.Contains(string(p.ResponseSchema), `"minimum":1`) {
				t.Fatalf("stored pause %s", head.Meta.Interrupt)
			}
			if got := flow.ResponseSchemaOf(head); string(got) != string(p.ResponseSchema) {
				t.Fatalf("ResponseSchemaOf %s", got)
			}
			res, err = r.Resume(ctx, "t", tc.answer)
			if tc.path == "" {
				if err != nil || res.StopReason != state.StopSuccess {
					t.Fatalf("resume: %v %v", res.StopReason, err)
				}
				return
			}
			var re *flow.ResponseError
			if !errors.As(err, &re) || !errors.Is(err, store.ErrInvalidArgument) || re.JSONPath("$") != tc.path || re.Node != "ask" {
				t.Fatalf("resume with %v: %v (path %v), want a ResponseError at %s", tc.answer, err, re, tc.path)
			}
			if after, _ := s.Load(ctx, store.LoadRequest{Thread: "t"}); after.Seq != head.Seq {
				t.Fatalf("a refused answer moved the thread: %d → %d", head.Seq, after.Seq)
			}
		})
	}
}

// TestResponseSchemaInvalid: a schema that is not one fails the node
// that raises it (ErrInvalidSchema), and a runner given one for a pause.
func TestResponseSchemaInvalid(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		schema any
	}{
		{name: "bad type", schema: json.RawMessage(`{"type": "nope"}`)},
		{name: "not JSON", schema: json.RawMessage(`{"type":`)},
		{name: "bad minimum", schema: map[string]any{"minimum": "one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := flow.NewRunner(askGraph(t, tc.schema), inmem.Open(store.Options{}), flow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Invoke(ctx, "t", state.Update{}); !errors.Is(err, flow.ErrInvalidSchema) {
				t.Fatalf("invoke: %v, want ErrInvalidSchema", err)
			}
			raw, _ := json.Marshal(tc.schema)
			_, err = flow.NewRunner(askGraph(t, nil), inmem.Open(store.Options{}), flow.Options{InterruptBefore: []string{"ask"}, ResponseSchemas: map[string]json.RawMessage{"ask": raw}})
			if !errors.Is(err, flow.ErrInvalidSchema) {
				t.Fatalf("NewRunner: %v, want ErrInvalidSchema", err)
			}
		})
	}
	_, err := flow.NewRunner(askGraph(t, nil), inmem.Open(store.Options{}), flow.Options{ResponseSchemas: map[string]json.RawMessage{"nobody": json.RawMessage(`{}`)}})
	if !errors.Is(err, flow.ErrInvalidGraph) {
		t.Fatalf("unknown node: %v", err)
	}
}

// TestPauseResponseSchema: a pause before a node (InterruptBefore) carries
// the node's Options.ResponseSchemas, kept by an update at the pause, and
// an approval's value is checked against it.
func TestPauseResponseSchema(t *testing.T) {
	ctx := context.Background()
	g, err := flow.NewGraph(state.MustSchema(state.WithField("count", state.ReducerReplace))).
		AddNode("send", func(context.Context, state.Doc) (state.Update, error) { return nil, nil }).
		Chain("send").Compile()
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	r, err := flow.NewRunner(g, s, flow.Options{InterruptBefore: []string{"send"}, ResponseSchemas: map[string]json.RawMessage{"send": json.RawMessage(countSchema)}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Invoke(ctx, "t", state.Update{}); err != nil || res.StopReason != state.StopInterrupt {
		t.Fatalf("invoke: %v %v", res.StopReason, err)
	}
	head, _ := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if flow.ResponseSchemaOf(head) == nil {
		t.Fatalf("pause %s has no response_schema", head.Meta.Interrupt)
	}
	if _, err := r.UpdateState(ctx, "t", state.Update{"count": 1}, flow.START); err != nil {
		t.Fatal(err)
	}
	head, _ = s.Load(ctx, store.LoadRequest{Thread: "t"})
	if flow.ResponseSchemaOf(head) == nil {
		t.Fatalf("the update at the pause dropped its response_schema: %s", head.Meta.Interrupt)
	}
	bad := flow.Approval{Action: "edit", Value: json.RawMessage(`{"count": -1}`)}
	if _, err := r.Resume(ctx, "t", bad); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad edit: %v", err)
	}
	good := flow.Approval{Action: "edit", Value: json.RawMessage(`{"count": 4}`)}
	if res, err := r.Resume(ctx, "t", good); err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("good edit: %v %v", res.StopReason, err)
	}
}
