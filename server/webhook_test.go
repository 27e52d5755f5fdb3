package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestWebhook: a run with a webhook posts the run, as the API shows it,
// with the thread's values, to the URL when it ends — trying again while
// the receiver fails (here on loopback: Config.WebhookPrivate); a webhook
// that is not an absolute http(s) URL, that carries credentials, or that
// the server's check refuses is a 422 that creates nothing.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	var fails atomic.Int64
	fails.Store(2)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fails.Add(-1) >= 0 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
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
	var calls atomic.Int64
	s := inmem.Open(store.Options{})
	srv, err := server.New(server.Config{Store: s, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}, WebhookPrivate: true, WebhookCheck: func(u *url.URL) error {
		if strings.HasPrefix(u.Host, "blocked.") {
			return errors.New("host not allowed")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	ts.json("POST", "/threads", map[string]any{"thread_id": "h"}, 200)
	out := ts.json("POST", "/threads/h/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "webhook": recv.URL + "/hook?x=1"}, 200)
	if out["__interrupt__"] == nil {
		t.Fatalf("the run: %v", out)
	}
	crashtest.WaitFor(t, 20*time.Second, "the webhook, after two failures", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	hook := got[0]
	values, _ := hook["values"].(map[string]any)
	if hook["thread_id"] != "h" || hook["status"] != "interrupted" || hook["run_id"] == nil || values["__interrupt__"] == nil {
		t.Fatalf("the webhook got %v", hook)
	}
	for _, bad := range []any{"ftp://x.example/h", "http://user:pw@x.example/h", "/relative", "http://blocked.example/h", 5} {
		code, b := ts.do("POST", "/threads/h/runs", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "webhook": bad})
		if code != 422 || !strings.Contains(string(b), "$.webhook") {
			t.Fatalf("webhook %v: %d %s", bad, code, b)
		}
	}
	_, b := ts.do("GET", "/threads/h/runs", nil)
	var list []any
	_ = json.Unmarshal(b, &list)
	if len(list) != 1 {
		t.Fatalf("refused webhooks made runs: %d", len(list))
	}
}

// TestWebhookPath: where the program serving the API names its own
// address (Config.BaseURL), a webhook that is a path posts to that
// program's route, as LangGraph's server posts to its custom routes;
// the path goes through the server's check like any URL.
func TestWebhookPath(t *testing.T) {
	got := make(chan string, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /custom/hook", func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		got <- fmt.Sprint(m["status"], " ", r.URL.Query().Get("x"))
	})
	app := httptest.NewServer(mux) // the embedding program's routes
	defer app.Close()
	base, _ := url.Parse(app.URL)
	var calls atomic.Int64
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}, BaseURL: base,
		WebhookCheck: func(u *url.URL) error {
			if strings.Contains(u.Path, "blocked") {
				return errors.New("path not allowed")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	ts.json("POST", "/threads", map[string]any{"thread_id": "h"}, 200)
	ts.json("POST", "/threads/h/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "webhook": "/custom/hook?x=1"}, 200)
	select {
	case s := <-got:
		if s != "interrupted 1" {
			t.Fatalf("the route got %q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook at the program's route")
	}
	if code, b := ts.do("POST", "/threads/h/runs", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "webhook": "/blocked"}); code != 422 || !strings.Contains(string(b), "path not allowed") {
		t.Fatalf("a refused path: %d %s", code, b)
	}
}

// TestWebhookPrivateRefused: without Config.WebhookPrivate, a webhook to
// a loopback, private or link-local address — given as an address or as
// a name that resolves to one — is a 422 that creates nothing.
func TestWebhookPrivateRefused(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "h"}, 200)
	for _, u := range []string{"http://127.0.0.1:9/h", "http://localhost:9/h", "http://[::1]/h", "http://10.1.2.3/h", "http://192.168.0.1/h", "http://169.254.169.254/latest/meta-data", "http://[fd00::1]/h", "http://100.64.0.1/h", "http://0.0.0.0/h"} {
		code, b := ts.do("POST", "/threads/h/runs", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "webhook": u})
		if code != 422 || !strings.Contains(string(b), "$.webhook") || !strings.Contains(string(b), "private") {
			t.Errorf("webhook %s: %d %s", u, code, b)
		}
	}
	_, b := ts.do("GET", "/threads/h/runs", nil)
	if strings.Contains(string(b), "run_id") {
		t.Fatalf("refused webhooks made runs: %s", b)
	}
}
