package server_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestBadBytes sends raw bytes over net/http (the SDKs cannot send them).
// Invalid UTF-8 anywhere in a JSON body is a 422 at its path, and nothing
// is stored (it was stored with U+FFFD in its place); an odd query value
// (a boolean that is not one, a parameter that is not UTF-8 or holds a
// NUL or a newline, a bad escape) is a 422 naming the parameter instead of
// being ignored.
func TestBadBytes(t *testing.T) {
	var calls atomic.Int64
	s := inmem.Open(store.Options{})
	ts := newServer(t, s, approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1", "metadata": map[string]any{"owner": "ada"}}, 200)
	for _, tc := range []struct {
		name, method, path, body string
		where                    string
	}{
		{"a thread's metadata", "POST", "/threads", "{\"thread_id\": \"t2\", \"metadata\": {\"name\": \"ab\xffc\"}}", "$.metadata.name"},
		{"a thread id", "POST", "/threads", "{\"thread_id\": \"t\xc3\"}", "$.thread_id"},
		{"a metadata key", "PATCH", "/threads/t1", "{\"metadata\": {\"n\xffme\": 1}}", "$.metadata.n\ufffdme"},
		{"new metadata", "PATCH", "/threads/t1", "{\"metadata\": {\"owner\": \"\xff\"}}", "$.metadata.owner"},
		{"a run's input", "POST", "/threads/t1/runs", "{\"assistant_id\": \"drafts\", \"input\": {\"drafts\": [\"ok\", \"b\xfe\"]}}", "$.input.drafts[1]"},
		{"a state update", "POST", "/threads/t1/state", "{\"values\": {\"drafts\": \"\xed\xa0\x80\"}}", "$.values.drafts"},
		{"a store item", "PUT", "/store/items", "{\"namespace\": [\"docs\"], \"key\": \"k\", \"value\": {\"text\": \"caf\xe9\"}}", "$.value.text"},
		{"subgraphs=maybe", "GET", "/threads/t1/state?subgraphs=maybe", "", "subgraphs"},
		{"checkpoint_ns not UTF-8", "GET", "/threads/t1/state?checkpoint_ns=%ff", "", "checkpoint_ns"},
		{"assistant_id with a NUL", "GET", "/interrupts?assistant_id=%00", "", "assistant_id"},
		{"a namespace with a newline", "GET", "/store/items?namespace=docs%0A&key=k", "", "namespace"},
		{"a bad escape", "GET", "/threads/t1/runs?status=%zz", "", "status"},
		{"a semicolon", "GET", "/threads/t1/runs?limit=1;offset=2", "", "query"},
		{"a name not UTF-8", "GET", "/threads/t1/runs?%ff=1", "", "query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do(tc.method, tc.path, tc.body)
			var e struct{ Detail, Path string }
			_ = json.Unmarshal(b, &e)
			if code != 422 || e.Path != tc.where || e.Detail == "" {
				t.Fatalf("%d %s, want 422 at %q", code, b, tc.where)
			}
		})
	}
	// Nothing was stored: one thread with its metadata, no run, no item.
	if th, err := s.Thread(context.Background(), "t1"); err != nil || th.Metadata["owner"] != "ada" || len(th.Metadata) != 1 || th.Head != 0 {
		t.Fatalf("thread t1 after the bad requests: %+v, %v", th, err)
	}
	if _, err := s.Thread(context.Background(), "t2"); err == nil {
		t.Fatal("thread t2 was created")
	}
	if runs := ts.json("GET", "/threads/t1/runs", nil, 200)["list"].([]any); len(runs) != 0 || calls.Load() != 0 {
		t.Fatalf("%d runs, %d calls after the bad requests", len(runs), calls.Load())
	}
	if code, b := ts.do("GET", "/store/items?namespace=docs&key=k", nil); code != 200 || string(b) != "null\n" && string(b) != "null" {
		t.Fatalf("the item: %d %s", code, b)
	}
	// Well-formed values still read.
	for _, path := range []string{"/threads/t1/state?subgraphs=true", "/threads/t1/state?subgraphs=0", "/threads/t1/state?subgraphs=", "/threads/t1/runs?status=pending&limit=5"} {
		if code, b := ts.do("GET", path, nil); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, b)
		}
	}
}
