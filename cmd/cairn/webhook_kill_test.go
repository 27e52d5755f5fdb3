package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// TestServeWebhookPolicy: LANGGRAPH_WEBHOOKS, as LangGraph reads it,
// bounds what runs' webhooks may name (here one host) and adds headers to
// deliveries from templates over LG_WEBHOOK_ variables; a bad policy
// stops cairn serve before it opens the store. The header's secret is
// nowhere stored or logged, not even where a receiver echoes it in an
// error the server logs.
func TestServeWebhookPolicy(t *testing.T) {
	const secret = "tok-WEBHOOK-5eCr3t-77"
	auth := make(chan string, 1)
	var calls atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 { // a receiver that echoes the header in its error: the server logs the error
			http.Error(w, "not yet, "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
			return
		}
		select {
		case auth <- r.Header.Get("Authorization"):
		default:
		}
	}))
	defer recv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "serve.db")
	policy := `{"url": {"allowed_domains": ["127.0.0.1"]}, "headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}"}}`
	assistants := filepath.Join("..", "..", "examples", "serve")
	for _, bad := range []string{`{"url": {"allowed_domains": ["http://x"]}}`, `{"headers": {"A": "${{ env.HOME }}"}}`, `{"nope": 1}`} {
		code, _, errOut := cli(t, map[string]string{"LANGGRAPH_WEBHOOKS": bad}, "serve", "--addr", "127.0.0.1:0", "--assistants", assistants, "--store", "sqlite://"+filepath.Join(dir, "bad.db"))
		if code == 0 || !strings.Contains(errOut, "LANGGRAPH_WEBHOOKS") {
			t.Fatalf("LANGGRAPH_WEBHOOKS %s: exit %d, %s", bad, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.db")); err == nil {
		t.Fatal("a bad policy opened the store")
	}
	p := startServeCmd(t, cairnProcess(t, []string{"LANGGRAPH_WEBHOOKS=" + policy, "LG_WEBHOOK_TOKEN=" + secret},
		"serve", "--addr", "127.0.0.1:0", "--assistants", assistants, "--store", "sqlite://"+db, "--webhook-private"))
	var th, out map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := p.call(t, "POST", "/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "five-steps", "input": "x", "webhook": recv.URL + "/hook"}, &out); code != 200 {
		t.Fatalf("run: %d %v", code, out)
	}
	select {
	case got := <-auth:
		if got != "Bearer "+secret {
			t.Fatalf("the delivery's Authorization: %q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery")
	}
	var refused map[string]any
	if code := p.call(t, "POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "five-steps", "input": "x", "webhook": "http://localhost:9/hook"}, &refused); code != 422 {
		t.Fatalf("a webhook to another host: %d %v", code, refused)
	}
	p.stop(syscall.SIGTERM)
	for _, f := range []string{db, db + "-wal"} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the webhook header's secret", filepath.Base(f))
		}
	}
	if strings.Contains(p.logText(), secret) {
		t.Fatal("the server's log shows the webhook header's secret")
	}
}
