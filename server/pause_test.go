package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// pauseGraph drafts, then sends what the draft says, with a pause before
// send (interrupt_before); drafts counts the draft node's runs.
func pauseGraph(t *testing.T, drafts *atomic.Int64) *runs.Graph {
	t.Helper()
	schema := state.MustSchema(state.WithField("draft", state.ReducerReplace), state.WithField("sent", state.ReducerReplace))
	g := flow.NewGraph(schema).
		AddNode("draft", func(ctx context.Context, s state.Doc) (state.Update, error) {
			n := drafts.Add(1)
			return state.Update{"draft": fmt.Sprintf("draft %d", n)}, nil
		}).
		AddNode("send", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var d string
			if err := s.Get("draft", &d); err != nil {
				return nil, err
			}
			return state.Update{"sent": "sent: " + d}, nil
		}).
		Chain("draft", "send")
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "mail", Graph: c, Options: flow.Options{InterruptBefore: []string{"send"}}}
}

// TestUpdateAtPauseOverHTTP: at a pause before send, a state update
// without as_node is written as draft (the node that wrote the state
// there), and a run with no input sends the edited draft without drafting
// again or pausing again. A new run pauses again. With durability exit
// the pause's checkpoint holds the input and the draft step: still draft.
func TestUpdateAtPauseOverHTTP(t *testing.T) {
	for _, durability := range []string{"sync", "exit"} {
		t.Run(durability, func(t *testing.T) {
			var drafts atomic.Int64
			ts := newServer(t, inmem.Open(store.Options{}), pauseGraph(t, &drafts))
			ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
			run := map[string]any{"assistant_id": "mail", "input": map[string]any{}, "durability": durability}
			out := ts.json("POST", "/threads/t1/runs/wait", run, 200)
			if paused := ts.json("GET", "/threads/t1", nil, 200)["status"]; paused != "interrupted" || out["draft"] != "draft 1" {
				t.Fatalf("first run: %v", out)
			}
			ts.json("POST", "/threads/t1/state", map[string]any{"values": map[string]any{"draft": "edited by a person"}}, 200)
			st := ts.json("GET", "/threads/t1/state", nil, 200)
			md := st["metadata"].(map[string]any)
			if fmt.Sprint(st["next"]) != "[send]" || md["source"] != "update" || fmt.Sprint(md["cairn"].(map[string]any)["nodes"]) != "[draft]" {
				t.Fatalf("state after the update: next %v, metadata %v (the update is written as draft)", st["next"], md)
			}
			out = ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "mail", "input": nil, "durability": durability}, 200)
			if out["__interrupt__"] != nil || out["sent"] != "sent: edited by a person" || out["draft"] != "edited by a person" || drafts.Load() != 1 {
				t.Fatalf("run after the update: %v, %d drafts (want the edited draft sent, one draft)", out, drafts.Load())
			}
			out = ts.json("POST", "/threads/t1/runs/wait", run, 200)
			if paused := ts.json("GET", "/threads/t1", nil, 200)["status"]; paused != "interrupted" || out["draft"] != "draft 2" {
				t.Fatalf("a new run: %v (it pauses before send)", out)
			}
		})
	}
}

// TestUpdateAtInterruptReruns: at a node's interrupt (approve asks), an
// update without as_node is written as the node before it (write), so
// approve runs again and asks again: an update never skips the question.
func TestUpdateAtInterruptReruns(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
	ts.json("POST", "/threads/t1/state", map[string]any{"values": map[string]any{"drafts": "edited"}}, 200)
	st := ts.json("GET", "/threads/t1/state", nil, 200)
	if fmt.Sprint(st["next"]) != "[approve]" {
		t.Fatalf("state after the update: next %v (want approve again)", st["next"])
	}
	out := ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "drafts", "input": nil}, 200)
	if out["__interrupt__"] == nil || out["approved"] != nil || calls.Load() != 3 {
		t.Fatalf("run after the update: %v, %d drafts written (approve asks again)", out, calls.Load())
	}
}

// TestUpdateAmbiguousWriter: a checkpoint two nodes wrote in one step
// names no default node: the update is refused, naming them, and nothing
// is written.
func TestUpdateAmbiguousWriter(t *testing.T) {
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend))
	node := func(name string) flow.NodeFunc {
		return func(context.Context, state.Doc) (state.Update, error) { return state.Update{"log": name}, nil }
	}
	g := flow.NewGraph(schema).AddNode("a", node("a")).AddNode("b", node("b")).AddNode("c", node("c")).
		AddEdge(flow.START, "a").AddEdge(flow.START, "b").AddEdge("a", "c").AddEdge("b", "c")
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "fan", Graph: c, Options: flow.Options{InterruptBefore: []string{"c"}}})
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "fan", "input": map[string]any{}}, 200)
	before := ts.json("GET", "/threads/t1/state", nil, 200)["checkpoint"]
	code, body := ts.do("POST", "/threads/t1/state", map[string]any{"values": map[string]any{"log": "x"}})
	if code != 422 || !strings.Contains(string(body), "as_node") || !strings.Contains(string(body), `[\"a\" \"b\"]`) {
		t.Fatalf("ambiguous update: %d %s", code, body)
	}
	if after := ts.json("GET", "/threads/t1/state", nil, 200)["checkpoint"]; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the refused update moved the head: %v → %v", before, after)
	}
	ts.json("POST", "/threads/t1/state", map[string]any{"values": map[string]any{"log": "x"}, "as_node": "b"}, 200)
}
