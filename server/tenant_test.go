package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestTenants walks every endpoint with two tenants' keys: another
// tenant's thread, run or checkpoint answers 404, exactly as a missing one
// does, and searches show only the caller's own.
func TestTenants(t *testing.T) {
	s := inmem.Open(store.Options{})
	ks, err := store.KeysOf(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keyA, _, err := server.NewKey(ctx, ks, "acme", "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyB, recB, err := server.NewKey(ctx, ks, "globex", "b", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv, err := server.New(server.Config{Store: s, Keys: ks, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTP(t, srv)
	call := func(key, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, hs+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// Tenant A's thread, with a run stopped at its interrupt.
	if code, b := call(keyA, "POST", "/threads", `{"thread_id": "a1"}`); code != 200 {
		t.Fatalf("create: %d %s", code, b)
	}
	code, b := call(keyA, "POST", "/threads/a1/runs/wait", `{"assistant_id": "drafts", "input": {}}`)
	if code != 200 || !strings.Contains(b, "__interrupt__") {
		t.Fatalf("run: %d %s", code, b)
	}
	_, b = call(keyA, "GET", "/threads/a1/runs", "")
	var runs []map[string]any
	_ = json.Unmarshal([]byte(b), &runs)
	rid := runs[0]["run_id"].(string)
	cp := "00000000-0000-8000-8000-000000000002"
	code, b = call(keyA, "POST", "/threads/a1/runs/crons", `{"assistant_id": "drafts", "schedule": "0 0 1 1 *", "input": {}}`)
	var cron map[string]any
	if _ = json.Unmarshal([]byte(b), &cron); code != 200 || cron["cron_id"] == nil {
		t.Fatalf("cron: %d %s", code, b)
	}
	cid := cron["cron_id"].(string)

	walked := []struct{ method, path, body string }{
		{"GET", "/threads/a1", ""},
		{"PATCH", "/threads/a1", `{"metadata": {"x": 1}}`},
		{"DELETE", "/threads/a1", ""},
		{"POST", "/threads/a1/copy", ""},
		{"GET", "/threads/a1/state", ""},
		{"POST", "/threads/a1/state", `{"values": {}}`},
		{"GET", "/threads/a1/state/" + cp, ""},
		{"POST", "/threads/a1/state/checkpoint", `{"checkpoint": {"checkpoint_id": "` + cp + `"}}`},
		{"GET", "/threads/a1/history", ""},
		{"POST", "/threads/a1/history", `{}`},
		{"GET", "/threads/a1/storage", ""},
		{"GET", "/threads/a1/bundle", ""},
		{"POST", "/threads/a1/replay", `{"into": "a1-replayed"}`},
		{"POST", "/threads/a1/steer", `{"message": "also check the date"}`},
		{"GET", "/threads/a1/inbox", ""},
		{"POST", "/threads/a1/runs", `{"assistant_id": "drafts", "command": {"resume": true}}`},
		{"POST", "/threads/a1/runs/stream", `{"assistant_id": "drafts", "command": {"resume": true}}`},
		{"POST", "/threads/a1/runs/wait", `{"assistant_id": "drafts", "command": {"resume": true}}`},
		{"GET", "/threads/a1/runs", ""},
		{"GET", "/threads/a1/runs/" + rid, ""},
		{"DELETE", "/threads/a1/runs/" + rid, ""},
		{"POST", "/threads/a1/runs/" + rid + "/cancel", ""},
		{"POST", "/threads/a1/runs/" + rid + "/retry", ""},
		{"GET", "/threads/a1/runs/" + rid + "/join", ""},
		{"GET", "/threads/a1/runs/" + rid + "/stream", ""},
		{"GET", "/threads/a1/interrupts", ""},
		{"POST", "/threads/a1/commands", `{"id": 1, "method": "state.get"}`},
		{"POST", "/threads/a1/stream/events", `{"channels": ["values"]}`},
		{"GET", "/threads/a1/stream/events", ""},
		{"POST", "/threads/a1/interrupts/x/answer", `{"action": "approve"}`},
		{"POST", "/threads/a1/runs/crons", `{"assistant_id": "drafts", "schedule": "@daily"}`},
		{"GET", "/runs/crons/" + cid, ""},
		{"PATCH", "/runs/crons/" + cid, `{"enabled": false}`},
		{"DELETE", "/runs/crons/" + cid, ""},
		{"DELETE", "/checkpointer/threads/a1", ""},
		{"POST", "/checkpointer/threads/a1/copy", `{"target_thread_id": "mine"}`},
	}
	checkWalked(t, hs, walked, rid, cp)
	for _, tc := range walked {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, other := call(keyB, tc.method, tc.path, tc.body)
			missing := strings.Replace(tc.path, "/a1", "/nope", 1)
			codeMissing, _ := call(keyB, tc.method, missing, tc.body)
			if code != 404 || codeMissing != 404 || strings.Contains(other, "acme") {
				t.Fatalf("tenant globex: %d %s (a missing thread: %d)", code, other, codeMissing)
			}
			if code, _ := call("", tc.method, tc.path, tc.body); code != 401 {
				t.Fatalf("no key: %d", code)
			}
			if code, _ := call("cairn_"+recB.ID+"_wrong", tc.method, tc.path, tc.body); code != 401 {
				t.Fatalf("a wrong secret: %d", code)
			}
		})
	}
	// Searches and counts show only the caller's own.
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/threads/search", `{}`, "[]"},
		{"POST", "/threads/count", `{}`, "0"},
		{"POST", "/runs/crons/search", `{}`, "[]"},
		{"POST", "/runs/crons/count", `{}`, "0"},
		{"GET", "/interrupts?status=pending", "", "[]"},
	} {
		if code, b := call(keyB, tc.method, tc.path, tc.body); code != 200 || strings.TrimSpace(b) != tc.want {
			t.Errorf("%s %s as globex: %d %s", tc.method, tc.path, code, b)
		}
		if code, b := call(keyA, tc.method, tc.path, tc.body); code != 200 || strings.TrimSpace(b) == tc.want {
			t.Errorf("%s %s as acme: %d %s", tc.method, tc.path, code, b)
		}
	}
	// Tenant A's thread is intact.
	if code, b := call(keyA, "GET", "/threads/a1", ""); code != 200 || !strings.Contains(b, `"interrupted"`) {
		t.Fatalf("acme's thread after globex's calls: %d %s", code, b)
	}
	if code, b := call(keyA, "GET", "/runs/crons/"+cid, ""); code != 200 || !strings.Contains(b, `"enabled":true`) {
		t.Fatalf("acme's cron after globex's calls: %d %s", code, b)
	}
	// The open endpoints need no key; a revoked key is refused at once.
	for _, p := range []string{"/ok", "/info", "/openapi.json"} {
		if code, _ := call("", "GET", p, ""); code != 200 {
			t.Errorf("%s without a key: %d", p, code)
		}
	}
	if err := ks.DeleteKey(ctx, recB.ID); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(keyB, "POST", "/threads/search", `{}`); code != 401 {
		t.Fatalf("a revoked key: %d", code)
	}
}

func TestRateLimit(t *testing.T) {
	s := inmem.Open(store.Options{})
	ks, _ := store.KeysOf(s)
	key, _, err := server.NewKey(context.Background(), ks, "acme", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv, err := server.New(server.Config{Store: s, Keys: ks, RateLimit: 2, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	url := newHTTP(t, srv)
	var codes []int
	for range 6 {
		req, _ := http.NewRequest("POST", url+"/threads/search", strings.NewReader("{}"))
		req.Header.Set("x-api-key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		codes = append(codes, res.StatusCode)
		if res.StatusCode == 429 && res.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if codes[0] != 200 || codes[3] != 200 || codes[5] != 429 {
		t.Fatalf("codes %v: a burst of 4 (twice the rate), then 429", codes)
	}
}

// checkWalked makes sure the walk covers every route of the OpenAPI
// document that names a thread, so a new endpoint cannot skip the test.
func checkWalked(t *testing.T, url string, walked []struct{ method, path, body string }, run, cp string) {
	t.Helper()
	res, err := http.Get(url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, w := range walked {
		have[strings.ToUpper(w.method)+" "+w.path] = true
	}
	r := strings.NewReplacer("{thread_id}", "a1", "{run_id}", run, "{checkpoint_id}", cp, "{interrupt_id}", "x")
	for path, ops := range doc.Paths {
		if !strings.Contains(path, "{thread_id}") {
			continue
		}
		for method := range ops {
			if key := strings.ToUpper(method) + " " + r.Replace(path); !have[key] {
				t.Errorf("the tenant walk misses %s", key)
			}
		}
	}
}
