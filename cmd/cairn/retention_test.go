package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
)

// TestServeRetention: a thread created through the API with a time to
// live is deleted by cairn serve's retention sweep once idle for longer;
// a thread without one, and one paused for an answer, stay; bad ttls are
// 422s that create nothing; the API's copy has the whole history; the
// sweeps' keep-last leaves a thread whole when every checkpoint is needed;
// the event log of a run that ended goes after --retention-run-logs, its
// record stays.
func TestServeRetention(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(dir, "r.db"),
		"--retention-every", "200ms", "--retention-keep-last", "2", "--retention-run-logs", "1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.logText())
		}
	})
	for _, tc := range []struct {
		name string
		body map[string]any
		code int
	}{
		{"minutes", map[string]any{"thread_id": "short", "ttl": 0.005}, 200},
		{"object", map[string]any{"thread_id": "short2", "ttl": map[string]any{"ttl": 0.005, "strategy": "delete"}}, 200},
		{"none", map[string]any{"thread_id": "kept"}, 200},
		{"paused", map[string]any{"thread_id": "paused", "ttl": 0.005}, 200},
		{"keep_latest", map[string]any{"thread_id": "bad1", "ttl": map[string]any{"ttl": 5, "strategy": "keep_latest"}}, 422},
		{"zero", map[string]any{"thread_id": "bad2", "ttl": 0}, 422},
		{"text", map[string]any{"thread_id": "bad3", "ttl": "soon"}, 422},
		{"unknown field", map[string]any{"thread_id": "bad4", "ttl": map[string]any{"ttl": 5, "when": 1}}, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := p.call(t, "POST", "/threads", tc.body, nil); code != tc.code {
				t.Fatalf("create: %d, want %d", code, tc.code)
			}
			if tc.code != 200 {
				if code := p.call(t, "GET", "/threads/"+tc.body["thread_id"].(string), nil, nil); code != 404 {
					t.Fatalf("a refused thread exists: %d", code)
				}
			}
		})
	}
	// Five steps on "kept"; "paused" waits for an approval.
	if code := p.call(t, "POST", "/threads/kept/runs/wait", map[string]any{"assistant_id": "five-steps", "input": "x"}, nil); code != 200 {
		t.Fatalf("run: %d", code)
	}
	if code := p.call(t, "POST", "/threads/paused/runs/wait", map[string]any{"assistant_id": "approval", "input": "Where is my order?"}, nil); code != 200 {
		t.Fatalf("run: %d", code)
	}
	var cp map[string]any
	if code := p.call(t, "POST", "/threads/kept/copy", map[string]any{}, &cp); code != 200 {
		t.Fatalf("copy: %d", code)
	}
	var copied, orig []any
	p.call(t, "POST", "/threads/"+cp["thread_id"].(string)+"/history", map[string]any{"limit": 100}, &copied)
	p.call(t, "POST", "/threads/kept/history", map[string]any{"limit": 100}, &orig)
	if len(copied) != len(orig) || len(orig) < 6 {
		t.Fatalf("the copy has %d checkpoints, the thread %d", len(copied), len(orig))
	}
	crashtest.WaitFor(t, 10*time.Second, "the sweep to delete the expired threads", func() bool {
		return p.call(t, "GET", "/threads/short", nil, nil) == 404 && p.call(t, "GET", "/threads/short2", nil, nil) == 404
	})
	for _, id := range []string{"kept", "paused"} {
		if code := p.call(t, "GET", "/threads/"+id, nil, nil); code != 200 {
			t.Errorf("thread %s: %d after the sweep", id, code)
		}
	}
	var st map[string]any
	time.Sleep(500 * time.Millisecond) // a few more sweeps
	var h []any
	if p.call(t, "POST", "/threads/kept/history", map[string]any{"limit": 100}, &h); len(h) != len(orig) {
		t.Fatalf("%d checkpoints after the sweeps, %d before; each was needed", len(h), len(orig))
	}
	if code := p.call(t, "GET", "/threads/kept/state", nil, &st); code != 200 || st["values"] == nil {
		t.Fatalf("state after the sweep: %d %v", code, st)
	}
	var runs []map[string]any
	if p.call(t, "GET", "/threads/kept/runs", nil, &runs); len(runs) != 1 {
		t.Fatalf("runs of kept: %v", runs)
	}
	stream := p.url + "/threads/kept/runs/" + runs[0]["run_id"].(string) + "/stream"
	crashtest.WaitFor(t, 10*time.Second, "the sweep to delete the ended run's event log", func() bool {
		return len(readSSE(t, streamFrom(t, context.Background(), stream, ""), nil)) == 0
	})
	if p.call(t, "GET", "/threads/kept/runs/"+runs[0]["run_id"].(string), nil, nil) != 200 {
		t.Fatal("the run's record went with its log")
	}
}
