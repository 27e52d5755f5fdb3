package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// weatherGraph is a router whose weather_graph node is a subgraph that
// pauses before its weather_node (a subgraph's own interrupt, as
// LangGraph compiles it with interruptBefore), with a subgraph of its own.
func weatherGraph(t *testing.T) *runs.Graph {
	t.Helper()
	ok := func(u state.Update) flow.NodeFunc {
		return func(context.Context, state.Doc) (state.Update, error) { return u, nil }
	}
	detail, err := flow.NewGraph(state.MustSchema(state.WithField("detail", state.ReducerReplace))).
		AddNode("look", ok(state.Update{"detail": "clear"})).AddEdge(flow.START, "look").Compile()
	if err != nil {
		t.Fatal(err)
	}
	ws := state.MustSchema(state.WithField("city", state.ReducerReplace), state.WithField("report", state.ReducerReplace), state.WithField("detail", state.ReducerReplace))
	weather, err := flow.NewGraph(ws).
		AddNode("model_node", ok(state.Update{"city": "San Francisco"})).
		AddNode("weather_node", func(_ context.Context, s state.Doc) (state.Update, error) {
			var city string
			_ = s.Get("city", &city)
			return state.Update{"report": "It's sunny in " + city + "!"}, nil
		}).
		AddSubgraph("detail_graph", detail, flow.SubgraphOptions{}).
		AddEdge(flow.START, "model_node").AddEdge("model_node", "weather_node").AddEdge("weather_node", "detail_graph").Compile()
	if err != nil {
		t.Fatal(err)
	}
	rs := state.MustSchema(state.WithField("route", state.ReducerReplace), state.WithField("report", state.ReducerReplace))
	router, err := flow.NewGraph(rs).
		AddNode("router_node", ok(state.Update{"route": "weather"})).
		AddSubgraph("weather_graph", weather, flow.SubgraphOptions{InterruptBefore: []string{"weather_node"},
			Output: func(_ context.Context, child state.Doc) (state.Update, error) {
				var r string
				_ = child.Get("report", &r)
				return state.Update{"report": r}, nil
			}}).
		AddEdge(flow.START, "router_node").AddEdge("router_node", "weather_graph").Compile()
	if err != nil {
		t.Fatal(err)
	}
	// The subgraphs' states typed: a schema given as is (an enum), and a
	// Go type.
	types := runs.GraphTypes{Subgraphs: map[string]runs.GraphTypes{"weather_graph": {
		State: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"San Francisco", "LA"}}}},
		Subgraphs: map[string]runs.GraphTypes{"detail_graph": {State: struct {
			Detail string `json:"detail"`
		}{}}},
	}}}
	return &runs.Graph{ID: "weather", Graph: router, Types: types}
}

// TestSubgraphs: GET /assistants/{id}/subgraphs lists a graph's subgraphs
// by namespace with their state schemas (recurse: nested ones, joined with
// "|"); a subgraph's own interrupt_before pauses the parent, whose thread
// is interrupted with the subgraph next, and a run with no input goes on
// in the subgraph — from its own state, which the paused task's
// checkpoint names and an update of that namespace changes; an
// interrupt_before naming no node of the graph pauses nothing, as in
// LangGraph.
func TestSubgraphs(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), weatherGraph(t))
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if got := keys(ts.json("GET", "/assistants/weather/subgraphs", nil, 200)); fmt.Sprint(got) != "[weather_graph]" {
		t.Fatalf("subgraphs %v", got)
	}
	all := ts.json("GET", "/assistants/weather/subgraphs?recurse=true", nil, 200)
	if got := keys(all); fmt.Sprint(got) != "[weather_graph weather_graph|detail_graph]" {
		t.Fatalf("subgraphs, recursing: %v", got)
	}
	prop := func(ns, field string) string {
		b, _ := json.Marshal(all[ns].(map[string]any)["state"].(map[string]any)["properties"].(map[string]any)[field])
		return string(b)
	}
	for _, c := range []struct{ ns, field, want string }{
		{"weather_graph", "city", `{"enum":["San Francisco","LA"],"type":"string"}`},
		{"weather_graph", "report", `{}`},
		{"weather_graph|detail_graph", "detail", `{"type":"string"}`},
	} {
		if got := prop(c.ns, c.field); got != c.want {
			t.Errorf("%s's %s: %s, want %s", c.ns, c.field, got, c.want)
		}
	}
	if got := keys(ts.json("GET", "/assistants/weather/subgraphs/weather_graph|detail_graph", nil, 200)); fmt.Sprint(got) != "[weather_graph|detail_graph]" {
		t.Fatalf("one namespace: %v", got)
	}
	ts.json("POST", "/threads", map[string]any{"thread_id": "w"}, 200)
	ts.json("POST", "/threads/w/runs/wait", map[string]any{"assistant_id": "weather", "input": map[string]any{}, "interrupt_before": []string{"tool"}}, 200)
	th := ts.json("GET", "/threads/w", nil, 200)
	st := ts.json("GET", "/threads/w/state", nil, 200)
	if th["status"] != "interrupted" || fmt.Sprint(st["next"]) != "[weather_graph]" {
		t.Fatalf("after the first run: %v, next %v", th["status"], st["next"])
	}
	// A subgraph's pause is a pause, as LangGraph shows one: no interrupt
	// object, on the task or the thread.
	if tasks := st["tasks"].([]any); len(tasks) != 1 || len(tasks[0].(map[string]any)["interrupts"].([]any)) != 0 || len(th["interrupts"].(map[string]any)) != 0 {
		t.Fatalf("the subgraph's pause shows an interrupt: %v, %v", st["tasks"], th["interrupts"])
	}
	// The paused subgraph's task names its namespace: its own state is
	// read and updated there, and the resume goes on from the update.
	ref, _ := st["tasks"].([]any)[0].(map[string]any)["checkpoint"].(map[string]any)
	if ns, _ := ref["checkpoint_ns"].(string); !strings.HasPrefix(ns, "weather_graph:") || ref["thread_id"] != "w" {
		t.Fatalf("the paused subgraph's task checkpoint: %v", ref)
	}
	inner := ts.json("POST", "/threads/w/state/checkpoint", map[string]any{"checkpoint": ref}, 200)
	if fmt.Sprint(inner["next"]) != "[weather_node]" || inner["values"].(map[string]any)["city"] != "San Francisco" {
		t.Fatalf("the subgraph's state: next %v, values %v", inner["next"], inner["values"])
	}
	for _, bad := range []map[string]any{
		{"values": map[string]any{"city": "LA"}, "checkpoint": map[string]any{"checkpoint_ns": "nope:2"}},
		{"values": map[string]any{"city": "LA"}, "checkpoint": ref, "as_node": "router_node"},
		{"values": map[string]any{"city": "LA"}, "checkpoint": map[string]any{"checkpoint_ns": ref["checkpoint_ns"], "checkpoint_id": "3"}},
	} {
		if code, b := ts.do("POST", "/threads/w/state", bad); code != 422 {
			t.Fatalf("a bad update of the subgraph %v: %d %s", bad, code, b)
		}
	}
	ts.json("POST", "/threads/w/state", map[string]any{"values": map[string]any{"city": "LA"}, "checkpoint": ref}, 200)
	inner = ts.json("POST", "/threads/w/state/checkpoint", map[string]any{"checkpoint": ref}, 200)
	if th := ts.json("GET", "/threads/w", nil, 200); fmt.Sprint(inner["next"]) != "[weather_node]" || inner["values"].(map[string]any)["city"] != "LA" || th["status"] != "interrupted" {
		t.Fatalf("after the subgraph's update: next %v, values %v, thread %v", inner["next"], inner["values"], th["status"])
	}
	out := ts.json("POST", "/threads/w/runs/wait", map[string]any{"assistant_id": "weather", "input": nil}, 200)
	if out["report"] != "It's sunny in LA!" {
		t.Fatalf("after the resume: %v", out)
	}
	if th := ts.json("GET", "/threads/w", nil, 200); th["status"] != "idle" {
		t.Fatalf("the thread after the resume: %v", th["status"])
	}
}

// TestSupersteps: a thread made from supersteps (LangGraph's bulk update:
// POST /threads with supersteps and metadata.graph_id) holds their
// updates in order, each written as its node, with what follows that node
// scheduled; bad supersteps are 422s that create nothing, and an update
// that fails deletes the thread it began.
func TestSupersteps(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	body := map[string]any{"thread_id": "bulk", "metadata": map[string]any{"graph_id": "drafts"}, "supersteps": []any{
		map[string]any{"updates": []any{map[string]any{"as_node": "__input__", "values": map[string]any{}}}},
		map[string]any{"updates": []any{map[string]any{"as_node": "__start__", "values": map[string]any{}}}},
		map[string]any{"updates": []any{map[string]any{"as_node": "write", "values": map[string]any{"drafts": "one"}}}},
		map[string]any{"updates": []any{map[string]any{"as_node": "write", "values": map[string]any{"drafts": "two"}}}},
	}}
	ts.json("POST", "/threads", body, 200)
	st := ts.json("GET", "/threads/bulk/state", nil, 200)
	if fmt.Sprint(st["values"]) != "map[drafts:[one two]]" || fmt.Sprint(st["next"]) != "[write]" {
		t.Fatalf("state %v, next %v", st["values"], st["next"])
	}
	// __input__ then __start__ is a run's start, as LangGraph writes it: the
	// input checkpoint (next __start__) and the input applied.
	var hist []struct {
		Next     []string       `json:"next"`
		Metadata map[string]any `json:"metadata"`
	}
	if code, b := ts.do("POST", "/threads/bulk/history", map[string]any{"limit": 10}); code != 200 || json.Unmarshal(b, &hist) != nil {
		t.Fatalf("history: %d %s", code, b)
	}
	var got []string
	for _, h := range hist {
		got = append(got, fmt.Sprint(h.Metadata["source"], " ", h.Metadata["step"], " ", h.Next))
	}
	if want := "[update 2 [write] update 1 [write] loop 0 [write] input -1 [__start__]]"; fmt.Sprint(got) != want {
		t.Fatalf("history %v, want %v", got, want)
	}
	out := ts.json("POST", "/threads/bulk/runs/wait", map[string]any{"assistant_id": "drafts", "input": nil}, 200)
	if out["__interrupt__"] == nil || calls.Load() != 1 {
		t.Fatalf("a run from the supersteps: %v (%d writes)", out, calls.Load())
	}
	for i, bad := range []map[string]any{
		{"thread_id": "b1", "supersteps": []any{map[string]any{"updates": []any{map[string]any{"as_node": "write", "values": map[string]any{}}}}}},
		{"thread_id": "b2", "metadata": map[string]any{"graph_id": "nope"}, "supersteps": []any{}},
		{"thread_id": "b3", "metadata": map[string]any{"graph_id": "drafts"}, "supersteps": []any{map[string]any{"updates": []any{map[string]any{"as_node": "nope", "values": map[string]any{}}}}}},
		{"thread_id": "b4", "metadata": map[string]any{"graph_id": "drafts"}, "supersteps": []any{map[string]any{"updates": []any{map[string]any{"as_node": "write", "values": []int{1}}}}}},
		{"thread_id": "b5", "metadata": map[string]any{"graph_id": "drafts"}, "supersteps": "x"},
	} {
		if code, b := ts.do("POST", "/threads", bad); code != 422 && code != 404 {
			t.Fatalf("bad supersteps %d: %d %s", i, code, b)
		}
		if code, _ := ts.do("GET", "/threads/"+bad["thread_id"].(string), nil); code != 404 {
			t.Fatalf("bad supersteps %d made its thread", i)
		}
	}
}
