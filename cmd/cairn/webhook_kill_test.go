package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/store"
)

// TestWebhookOutboxSurvivesKill: a run's webhook is kept in the store
// before the run's end is recorded. The receiver fails while the server
// runs; the server is killed (SIGKILL) after the run ended; the next
// server on the store delivers the webhook when it starts, and drops it
// from the outbox once the receiver answers.
func TestWebhookOutboxSurvivesKill(t *testing.T) {
	var up atomic.Bool
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer recv.Close()
	db := filepath.Join(t.TempDir(), "serve.db")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--assistants", assistants, "--store", "sqlite://"+db, "--webhook-private")
	var th, out map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := p.call(t, "POST", "/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "five-steps", "input": "x", "webhook": recv.URL + "/hook"}, &out); code != 200 {
		t.Fatalf("run: %d %v", code, out)
	}
	if n := outboxEntries(t, db); n != 1 {
		t.Fatalf("%d webhooks in the outbox after the run, want 1", n)
	}
	p.stop(syscall.SIGKILL)
	up.Store(true)
	startServe(t, "--assistants", assistants, "--store", "sqlite://"+db, "--webhook-private")
	crashtest.WaitFor(t, 20*time.Second, "the webhook, delivered by the next server", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	hook := got[0]
	mu.Unlock()
	if hook["thread_id"] != tid || hook["status"] != "success" || hook["values"] == nil {
		t.Fatalf("the webhook got %v", hook)
	}
	crashtest.WaitFor(t, 10*time.Second, "the outbox emptied", func() bool { return outboxEntries(t, db) == 0 })
}

// outboxEntries counts the webhooks waiting in a store's outbox.
func outboxEntries(t *testing.T, db string) int {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite://"+db, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	items, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	list, err := items.Search(context.Background(), store.SearchOp{Tenant: store.SystemTenant("webhooks", ""), Prefix: []string{"outbox"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}
