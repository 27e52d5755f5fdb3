package server_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// flakyGraph runs "fetch" then "use"; "use" fails while fail is set.
func flakyGraph(t *testing.T, fetches *atomic.Int64, fail *atomic.Bool) *runs.Graph {
	t.Helper()
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend))
	g := flow.NewGraph(schema).
		AddNode("fetch", func(context.Context, state.Doc) (state.Update, error) {
			fetches.Add(1)
			return state.Update{"log": "fetched"}, nil
		}).
		AddNode("use", func(context.Context, state.Doc) (state.Update, error) {
			if fail.Load() {
				return nil, errors.New("the service is down")
			}
			return state.Update{"log": "used"}, nil
		}).
		AddEdge(flow.START, "fetch").AddEdge("fetch", "use").AddEdge("use", flow.END)
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "flaky", Graph: c}
}

// TestRetryRun: POST …/retry runs a failed run again from its last
// checkpoint (the step that succeeded is not run again); a run that
// succeeded, or a run in progress, is not retried. GET /queue counts the
// runs by assistant.
func TestRetryRun(t *testing.T) {
	var fetches atomic.Int64
	var fail atomic.Bool
	fail.Store(true)
	ts := newServer(t, inmem.Open(store.Options{}), flakyGraph(t, &fetches, &fail))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	run := ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "flaky", "input": map[string]any{}}, 200)
	if run["__error__"] == nil {
		t.Fatalf("the first attempt did not fail: %v", run)
	}
	runs := ts.json("GET", "/threads/t1/runs", nil, 200)["list"].([]any)
	rid := runs[0].(map[string]any)["run_id"].(string)
	fail.Store(false)
	got := ts.json("POST", "/threads/t1/runs/"+rid+"/retry", nil, 200)
	if got["run_id"] != rid {
		t.Fatalf("retry answered %v", got)
	}
	out := ts.json("GET", "/threads/t1/runs/"+rid+"/join", nil, 200)
	if log, _ := out["log"].([]any); len(log) != 2 || fetches.Load() != 1 {
		t.Fatalf("after the retry: %v, fetched %d times", out, fetches.Load())
	}
	q := ts.json("GET", "/queue", nil, 200)
	if q["queued"] != false || q["pending"] != 0.0 || q["running"] != 0.0 {
		t.Fatalf("GET /queue: %v", q)
	}
	for _, tc := range []struct{ name, path string }{
		{"succeeded", "/threads/t1/runs/" + rid + "/retry"},
		{"unknown run", "/threads/t1/runs/00000000-0000-4000-8000-000000000000/retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := ts.do("POST", tc.path, nil); code != 409 && code != 404 {
				t.Fatalf("%d", code)
			}
		})
	}
}
