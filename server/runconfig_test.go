package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestRunConfigReachesNodes: a run's config.configurable and context reach
// a Go graph's nodes (flow.RunConfigOf, flow.ContextAs), on a thread and
// stateless, with the config RemoteGraph sends (tags, metadata); a context
// that is not an object is a 422 naming $.context, and nothing is stored.
func TestRunConfigReachesNodes(t *testing.T) {
	schema := state.MustSchema(state.WithField("seen", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("read", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			uc, _, err := flow.ContextAs[struct {
				UserID string `json:"user_id"`
			}](ctx)
			if err != nil {
				return nil, err
			}
			model, _ := flow.RunConfigOf(ctx).Configurable["model_name"].(string)
			return state.Update{"seen": fmt.Sprintf("%s/%s", uc.UserID, model)}, nil
		}).
		AddEdge(flow.START, "read").Compile()
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	ts := newServer(t, s, &runs.Graph{ID: "reader", Graph: g})
	tests := []struct {
		name string
		path string
		body map[string]any
		want string
	}{
		{"wait, both", "/threads/t1/runs/wait", map[string]any{"config": map[string]any{"configurable": map[string]any{"model_name": "small"}}, "context": map[string]any{"user_id": "ada"}}, "ada/small"},
		{"wait, RemoteGraph's config", "/threads/t2/runs/wait", map[string]any{"config": map[string]any{"tags": []string{}, "metadata": map[string]any{"from": "remote"}, "configurable": map[string]any{"thread_id": "t2", "model_name": "big"}}}, "/big"},
		{"stateless, context only", "/runs/wait", map[string]any{"context": map[string]any{"user_id": "bob"}}, "bob/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["assistant_id"] = "reader"
			tc.body["if_not_exists"] = "create"
			tc.body["input"] = map[string]any{}
			out := ts.json("POST", tc.path, tc.body, 200)
			if out["seen"] != tc.want {
				t.Fatalf("the node saw %v, want %q", out["seen"], tc.want)
			}
		})
	}
	t.Run("a context that is not an object", func(t *testing.T) {
		out := ts.json("POST", "/threads/t3/runs/wait", map[string]any{"assistant_id": "reader", "if_not_exists": "create", "context": "ada"}, 422)
		if out["path"] != "$.context" {
			t.Fatalf("answer %v", out)
		}
		if _, err := s.Thread(context.Background(), "t3"); err == nil {
			t.Fatal("a refused run created its thread")
		}
	})
}

// TestGraphFactory: an assistant whose graph is built per run from its
// config (runs.Graph.Factory, LangGraph's graph factory) runs the graph
// the config asks for, and is drawn as the factory's graph for an empty
// config.
func TestGraphFactory(t *testing.T) {
	schema := state.MustSchema(state.WithField("said", state.ReducerReplace))
	build := func(_ context.Context, rc flow.RunConfig) (*flow.Compiled, error) {
		node := "whisper"
		if loud, _ := rc.Configurable["loud"].(bool); loud {
			node = "shout"
		}
		return flow.NewGraph(schema).
			AddNode(node, func(context.Context, state.Doc) (state.Update, error) { return state.Update{"said": node}, nil }).
			AddEdge(flow.START, node).Compile()
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "voice", Factory: build})
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want string
	}{{"default", nil, "whisper"}, {"configured", map[string]any{"configurable": map[string]any{"loud": true}}, "shout"}} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"assistant_id": "voice", "input": map[string]any{}}
			if tc.cfg != nil {
				body["config"] = tc.cfg
			}
			if out := ts.json("POST", "/runs/wait", body, 200); out["said"] != tc.want {
				t.Fatalf("said %v, want %s", out["said"], tc.want)
			}
		})
	}
	g := ts.json("GET", "/assistants/voice/graph", nil, 200)
	if !strings.Contains(fmt.Sprint(g["nodes"]), "whisper") {
		t.Fatalf("drawn as %v", g)
	}
	// An assistant configured loud: its thread's state is updated as its
	// graph, whose node is shout, not the drawing's whisper.
	ts.json("POST", "/assistants", map[string]any{"assistant_id": "loud", "graph_id": "voice", "config": map[string]any{"configurable": map[string]any{"loud": true}}}, 200)
	ts.json("POST", "/threads/lt/runs/wait", map[string]any{"assistant_id": "loud", "input": map[string]any{}, "if_not_exists": "create"}, 200)
	ts.json("POST", "/threads/lt/state", map[string]any{"values": map[string]any{"said": "edited"}, "as_node": "shout"}, 200)
	if code, b := ts.do("POST", "/threads/lt/state", map[string]any{"values": map[string]any{"said": "x"}, "as_node": "whisper"}); code != 422 {
		t.Fatalf("an update as the other config's node: %d %s", code, b)
	}
	ts.json("POST", "/threads/lt/runs/wait", map[string]any{"assistant_id": "loud", "command": map[string]any{"update": map[string]any{"said": "by command"}}}, 200)
	if st := ts.json("GET", "/threads/lt/state", nil, 200); fmt.Sprint(st["values"]) != "map[said:by command]" {
		t.Fatalf("state after the updates: %v", st["values"])
	}
}

// customError names itself as a JS exception class would.
type customError struct{ msg string }

func (e *customError) Error() string     { return e.msg }
func (e *customError) ErrorName() string { return "CustomError" }

// TestRunErrorsAsLangGraph: a failed node's error is told by its own name
// and message (as LangGraph's serializeError tells an exception), on the
// stream, in wait's __error__ and on the run, with secrets redacted; a run
// that reaches its recursion limit fails with GraphRecursionError.
func TestRunErrorsAsLangGraph(t *testing.T) {
	schema := state.MustSchema(state.WithField("n", state.ReducerReplace))
	fail := func(err error) *flow.Compiled {
		c, e := flow.NewGraph(schema).
			AddNode("boom", func(context.Context, state.Doc) (state.Update, error) { return nil, err }).
			AddEdge(flow.START, "boom").Compile()
		if e != nil {
			t.Fatal(e)
		}
		return c
	}
	loop, err := flow.NewGraph(schema).
		AddNode("again", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"n": 1}, nil }).
		AddEdge(flow.START, "again").AddEdge("again", "again").Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}),
		&runs.Graph{ID: "custom", Graph: fail(&customError{"Boo!"})},
		&runs.Graph{ID: "plain", Graph: fail(fmt.Errorf("no luck with key sk-live-0123456789abcdefghij"))},
		&runs.Graph{ID: "loop", Graph: loop})
	tests := []struct {
		assistant, body, kind, msg string
	}{
		{"custom", `{}`, "CustomError", "Boo!"},
		{"plain", `{}`, "Error", "no luck with key [REDACTED]"},
		{"loop", `{"recursion_limit": 3}`, "GraphRecursionError", `Recursion limit of 3 reached without hitting a stop condition. You can increase the limit by setting the "recursion_limit" config key.`},
	}
	for _, tc := range tests {
		t.Run(tc.assistant, func(t *testing.T) {
			var body map[string]any
			if err := json.Unmarshal(fmt.Appendf(nil, `{"assistant_id": %q, "input": {}, "config": %s}`, tc.assistant, tc.body), &body); err != nil {
				t.Fatal(err)
			}
			out := ts.json("POST", "/runs/wait", body, 200)
			got, _ := out["__error__"].(map[string]any)
			if got["error"] != tc.kind || got["message"] != tc.msg {
				t.Fatalf("wait's __error__ = %v, want %s: %s", out, tc.kind, tc.msg)
			}
			evs := ts.stream("POST", "/runs/stream", body, "", nil)
			last := evs[len(evs)-1]
			if last.Event != "error" || !strings.Contains(string(last.Data), fmt.Sprintf(`"error":%q`, tc.kind)) || strings.Contains(string(last.Data), "sk-live") {
				t.Fatalf("the stream ends with %s %s", last.Event, last.Data)
			}
			// On a thread, the thread is left in error (LangGraph's status).
			body["if_not_exists"] = "create"
			ts.json("POST", "/threads/"+tc.assistant+"/runs/wait", body, 200)
			if th := ts.json("GET", "/threads/"+tc.assistant, nil, 200); th["status"] != "error" {
				t.Fatalf("the thread after the run: %v", th["status"])
			}
			if tc.assistant == "loop" { // a run with no input goes on from where the limit stopped it
				before := len(ts.json("GET", "/threads/loop/state", nil, 200)["values"].(map[string]any))
				h1 := historyLen(t, ts, "loop")
				out := ts.json("POST", "/threads/loop/runs/wait", map[string]any{"assistant_id": "loop", "input": nil, "config": map[string]any{"recursion_limit": 2}}, 200)
				if h2 := historyLen(t, ts, "loop"); h2 < h1+2 || out["__error__"] == nil || before == 0 {
					t.Fatalf("a resume after the limit: %d checkpoints, then %d; %v", h1, h2, out)
				}
			}
		})
	}
}

// TestAfterSeconds: a run with after_seconds stays pending, its thread
// busy, until then; cancelled before it starts, it is interrupted when
// the cancel answers (as LangGraph's), without having run, and the thread
// is free again.
func TestAfterSeconds(t *testing.T) {
	schema := state.MustSchema(state.WithField("ran", state.ReducerReplace))
	var ran atomic.Int64
	g, err := flow.NewGraph(schema).
		AddNode("run", func(context.Context, state.Doc) (state.Update, error) {
			ran.Add(1)
			return state.Update{"ran": true}, nil
		}).
		AddEdge(flow.START, "run").Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "late", Graph: g})
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	run := ts.json("POST", "/threads/t1/runs", map[string]any{"assistant_id": "late", "input": map[string]any{}, "after_seconds": 0.3}, 200)
	id, _ := run["run_id"].(string)
	if got := ts.json("GET", "/threads/t1/runs?status=pending", nil, 200)["list"]; len(got.([]any)) != 1 {
		t.Fatalf("pending runs: %v", got)
	}
	ts.json("POST", "/threads/t1/runs", map[string]any{"assistant_id": "late", "input": map[string]any{}}, 409) // busy: reject
	start := time.Now()
	out := ts.json("GET", "/threads/t1/runs/"+id+"/join", nil, 200)
	if out["ran"] != true || time.Since(start) < 200*time.Millisecond || ran.Load() != 1 {
		t.Fatalf("joined %v after %s, %d runs", out, time.Since(start), ran.Load())
	}
	// Cancelled before it starts (without wait): interrupted when the
	// cancel answers, never run.
	for range 20 {
		run = ts.json("POST", "/threads/t1/runs", map[string]any{"assistant_id": "late", "input": map[string]any{}, "after_seconds": 60}, 200)
		id, _ = run["run_id"].(string)
		ts.json("POST", "/threads/t1/runs/"+id+"/cancel", nil, 204)
		if st := ts.json("GET", "/threads/t1/runs/"+id, nil, 200)["status"]; st != "interrupted" || ran.Load() != 1 {
			t.Fatalf("cancelled run: %v, %d runs", st, ran.Load())
		}
	}
	ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "late", "input": map[string]any{}}, 200)
	ts.json("POST", "/threads/t1/runs", map[string]any{"assistant_id": "late", "after_seconds": -1}, 422)
}

// TestRunMetadataOnCheckpoints: every checkpoint a run wrote carries its
// run's metadata and id in the API's history and state — a long run's
// 300th step too, though the store names the run only every 256 steps —
// and an outside update's checkpoint carries none.
func TestRunMetadataOnCheckpoints(t *testing.T) {
	schema := state.MustSchema(state.WithField("n", state.ReducerAdd))
	g, err := flow.NewGraph(schema).
		AddNode("again", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"n": 1}, nil }).
		AddEdge(flow.START, "again").
		AddRouter("again", func(_ context.Context, s state.Doc) ([]flow.Target, error) {
			var n int
			_ = s.Get("n", &n)
			if n >= 300 {
				return []flow.Target{{Node: flow.END}}, nil
			}
			return []flow.Target{{Node: "again"}}, nil
		}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "loop", Graph: g})
	ts.json("POST", "/threads", map[string]any{"thread_id": "long"}, 200)
	ts.json("POST", "/threads/long/runs/wait", map[string]any{"assistant_id": "loop", "input": map[string]any{}, "metadata": map[string]any{"batch": "b1"},
		"config": map[string]any{"recursion_limit": 1000, "metadata": map[string]any{"team": "search"}}}, 200)
	ts.json("POST", "/threads/long/state", map[string]any{"values": map[string]any{"n": 1}, "as_node": "again"}, 200)
	_, body := ts.do("POST", "/threads/long/history", map[string]any{"limit": 400})
	var hist []map[string]any
	if err := json.Unmarshal(body, &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) < 300 {
		t.Fatalf("%d checkpoints", len(hist))
	}
	if md := hist[0]["metadata"].(map[string]any); md["source"] != "update" || md["batch"] != nil {
		t.Fatalf("the update's checkpoint: %v", md)
	}
	run := ""
	for i, h := range hist[1:] {
		md := h["metadata"].(map[string]any)
		if run == "" {
			run, _ = md["run_id"].(string)
		}
		if md["batch"] != "b1" || md["team"] != "search" || md["run_id"] != run || md["graph_id"] != "loop" || md["assistant_id"] != "loop" {
			t.Fatalf("checkpoint %d from the head: %v", i+1, md)
		}
	}
	_, body = ts.do("POST", "/threads/long/history", map[string]any{"limit": 1000, "metadata": map[string]any{"batch": "b1"}})
	if err := json.Unmarshal(body, &hist); err != nil || len(hist) < 300 {
		t.Fatalf("the history filtered by the run's metadata: %d, %v", len(hist), err)
	}
}

func historyLen(t *testing.T, ts *testServer, thread string) int {
	t.Helper()
	_, b := ts.do("POST", "/threads/"+thread+"/history", map[string]any{"limit": 1000})
	var h []any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return len(h)
}
