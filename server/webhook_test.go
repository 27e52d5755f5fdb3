package server_test

import (
	"encoding/json"
	"errors"
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
// the receiver fails; a webhook that is not an absolute http(s) URL, that
// carries credentials, or that the server's check refuses is a 422 that
// creates nothing.
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
	srv, err := server.New(server.Config{Store: s, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}, WebhookCheck: func(u *url.URL) error {
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
