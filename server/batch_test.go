package server_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestPruneThreadsChecksFirst: POST /threads/prune checks every id before
// it prunes any — a thread with a run in progress is a 409 naming it, and
// the other threads keep their history; bad requests are 422s.
func TestPruneThreadsChecksFirst(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	for _, id := range []string{"idle", "busy"} {
		ts.json("POST", "/threads", map[string]any{"thread_id": id}, 200)
	}
	ts.json("POST", "/threads/idle/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
	run := ts.json("POST", "/threads/busy/runs", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "after_seconds": 60}, 200)
	before := historyLen(t, ts, "idle")
	code, b := ts.do("POST", "/threads/prune", map[string]any{"thread_ids": []string{"idle", "busy"}})
	if code != 409 || !strings.Contains(string(b), "$.thread_ids[1]") || historyLen(t, ts, "idle") != before {
		t.Fatalf("prune with a busy thread: %d %s; idle's history %d, was %d", code, b, historyLen(t, ts, "idle"), before)
	}
	for _, bad := range []map[string]any{{"thread_ids": []string{}}, {"thread_ids": []string{"idle"}, "strategy": "all"}, {"thread_ids": "idle"}} {
		if code, b := ts.do("POST", "/threads/prune", bad); code != 422 {
			t.Fatalf("prune %v: %d %s", bad, code, b)
		}
	}
	ts.do("POST", "/threads/busy/runs/"+run["run_id"].(string)+"/cancel", nil)
	if got := ts.json("POST", "/threads/prune", map[string]any{"thread_ids": []string{"idle", "busy"}}, 200); got["pruned_count"] != float64(2) {
		t.Fatalf("prune: %v", got)
	}
	ts.json("GET", "/threads/idle", nil, 404)
}

// TestPruneThreadsByFilter prunes the threads a filter matches (Cairn's
// alternative to thread_ids): only those, checked first like named ones.
func TestPruneThreadsByFilter(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	for _, th := range []struct{ id, team string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		ts.json("POST", "/threads", map[string]any{"thread_id": th.id, "metadata": map[string]any{"team": th.team}}, 200)
		ts.json("POST", "/threads/"+th.id+"/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
	}
	for _, bad := range []map[string]any{
		{"filter": map[string]any{"metadata": map[string]any{"team": "a"}}, "thread_ids": []string{"b1"}},
		{"filter": map[string]any{"colour": "red"}},
		{"filter": map[string]any{"status": "sleeping"}},
	} {
		if code, b := ts.do("POST", "/threads/prune", bad); code != 422 {
			t.Fatalf("prune %v: %d %s", bad, code, b)
		}
	}
	before := historyLen(t, ts, "a1")
	got := ts.json("POST", "/threads/prune", map[string]any{"filter": map[string]any{"metadata": map[string]any{"team": "a"}}, "strategy": "keep_latest"}, 200)
	if got["pruned_count"] != float64(2) || historyLen(t, ts, "a1") >= before || historyLen(t, ts, "b1") != before {
		t.Fatalf("keep_latest of team a: %v; a1 %d, b1 %d, were %d", got, historyLen(t, ts, "a1"), historyLen(t, ts, "b1"), before)
	}
	if got := ts.json("POST", "/threads/prune", map[string]any{"filter": map[string]any{"metadata": map[string]any{"team": "b"}}}, 200); got["pruned_count"] != float64(1) {
		t.Fatalf("delete of team b: %v", got)
	}
	ts.json("GET", "/threads/b1", nil, 404)
	ts.json("GET", "/threads/a2", nil, 200)
}
