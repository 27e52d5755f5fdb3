package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// checkpointerServer serves a memory store with two tenants' keys; call
// sends a request with a key.
func checkpointerServer(t *testing.T) (st store.Store, keyA, keyB string, call func(key, method, path, body string) (int, string)) {
	t.Helper()
	st = inmem.Open(store.Options{})
	ks, err := store.KeysOf(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if keyA, _, err = server.NewKey(ctx, ks, "acme", "a", time.Now()); err != nil {
		t.Fatal(err)
	}
	if keyB, _, err = server.NewKey(ctx, ks, "globex", "b", time.Now()); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Keys: ks})
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTP(t, srv)
	call = func(key, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs+path, strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	return st, keyA, keyB, call
}

// lgPutBody is a put of checkpoint id after parent appending one message.
func lgPutBody(thread, id, parent string, msg int) string {
	p := ""
	if parent != "" {
		p = fmt.Sprintf(`"parent_id": %q,`, parent)
	}
	ch := fmt.Sprintf(`"messages": {"append": [{"id": "m%d", "content": %q}], "base": %d}`, msg, strings.Repeat("x", 1000), msg-1)
	if parent == "" {
		ch = `"messages": {"value": []}`
	}
	return fmt.Sprintf(`{"thread_id": %q, %s "checkpoint": {"v": 4, "id": %q, "ts": "2026-01-01T00:00:00Z", "channel_versions": {"messages": %d}, "versions_seen": {}},
		"metadata": {"source": "loop", "step": %d, "parents": {}}, "channels": {%s}}`, thread, p, id, msg+1, msg, ch)
}

// TestCheckpointerAPI drives the checkpointer routes: a thread of appended
// messages stores one element per checkpoint, a stale writer gets a 409,
// bad puts are 422s or 404s that create nothing, and another tenant sees
// nothing.
func TestCheckpointerAPI(t *testing.T) {
	st, keyA, keyB, call := checkpointerServer(t)
	ids := make([]string, 51)
	for i := range ids {
		ids[i] = fmt.Sprintf("1f000000-0000-6000-8000-%012d", i)
		parent := ""
		if i > 0 {
			parent = ids[i-1]
		}
		if code, b := call(keyA, "POST", "/checkpointer/put", lgPutBody("t1", ids[i], parent, i)); code != 200 {
			t.Fatalf("put %d: %d %s", i, code, b)
		}
	}
	// Every checkpoint after the first stores the one message it added.
	for cp, err := range st.History(context.Background(), store.HistoryRequest{Thread: "t1"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Seq > 1 && (len(cp.Patch) != 1 || cp.Patch[0].Op != state.OpAdd || cp.Patch[0].Path != "/messages/-") {
			t.Fatalf("checkpoint %d patch %v", cp.Seq, cp.Patch)
		}
	}
	code, b := call(keyA, "POST", "/checkpointer/get", `{"thread_id": "t1", "checkpoint_id": "`+ids[3]+`"}`)
	if code != 200 || strings.Count(b, `"id":"m`) != 3 || !strings.Contains(b, `"parent_id":"`+ids[2]+`"`) {
		t.Fatalf("get by id: %d %.300s", code, b)
	}
	// A second writer on the old head is refused; nothing is stored.
	stale := lgPutBody("t1", "1f000000-0000-6000-8000-999999999999", ids[49], 50)
	if code, b := call(keyA, "POST", "/checkpointer/put", stale); code != http.StatusConflict || !strings.Contains(b, "moved on") {
		t.Fatalf("stale put: %d %s", code, b)
	}
	// Another tenant sees nothing and cannot write to the thread.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/checkpointer/get", `{"thread_id": "t1"}`},
		{"POST", "/checkpointer/put", lgPutBody("t1", "1f000000-0000-6000-8000-888888888888", ids[50], 51)},
		{"POST", "/checkpointer/writes", `{"thread_id": "t1", "checkpoint_id": "` + ids[50] + `", "task_id": "x", "writes": [{"channel": "a", "idx": 0, "value": 1}]}`},
		{"POST", "/checkpointer/threads/t1/copy", `{"target_thread_id": "mine"}`},
	} {
		if code, b := call(keyB, c.method, c.path, c.body); code != http.StatusNotFound {
			t.Errorf("tenant B %s %s: %d %s", c.method, c.path, code, b)
		}
	}
	if code, b := call(keyB, "POST", "/checkpointer/list", `{}`); code != 200 || b != "{\"refs\":[]}\n" {
		t.Errorf("tenant B lists: %d %s", code, b)
	}
	if code, b := call(keyB, "DELETE", "/checkpointer/threads/t1", ``); code != http.StatusNotFound {
		t.Errorf("tenant B deletes: %d %s", code, b)
	}
	if code, b := call(keyA, "POST", "/checkpointer/list", `{"thread_id": "t1", "limit": 2, "filter": {"step": 7}}`); code != 200 || strings.Count(b, "checkpoint_id") != 1 {
		t.Errorf("list with a filter: %d %s", code, b)
	}
}

// TestCheckpointerBadInput: each bad request is refused with where the
// problem is, and no thread is created.
func TestCheckpointerBadInput(t *testing.T) {
	st, keyA, _, call := checkpointerServer(t)
	for _, c := range []struct{ body, code, where string }{
		{`{"checkpoint": {"id": "a"}}`, "422", "$.thread_id"},
		{`{"thread_id": "new/1", "checkpoint": {"id": "a"}}`, "422", "$.thread_id"},
		{`{"thread_id": "new1", "checkpoint": {}}`, "422", "$.checkpoint.id"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a"}, "metadata": [1]}`, "422", "$.metadata"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a"}, "channels": {"c": {}}}`, "422", "$.channels.c"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a"}, "channels": {"c": {"append": [1]}}}`, "422", "$.channels.c.base"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a"}, "channels": {"c": {"append": [1], "base": 2}}}`, "422", "$.channels.c.base"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a", "channel_versions": [1]}}`, "422", "$.checkpoint.channel_versions"},
		{`{"thread_id": "new1", "checkpoint_ns": "` + strings.Repeat("é", 100) + `", "checkpoint": {"id": "a"}}`, "422", "$.checkpoint_ns"},
		{`{"thread_id": "new1", "parent_id": "p", "checkpoint": {"id": "a"}}`, "404", "parent checkpoint"},
		{`{"thread_id": "new1", "checkpoint": {"id": "a"}, "surprise": 1}`, "422", "surprise"},
	} {
		code, b := call(keyA, "POST", "/checkpointer/put", c.body)
		if fmt.Sprint(code) != c.code || !strings.Contains(b, c.where) {
			t.Errorf("%s: %d %s, want %s naming %s", c.body, code, b, c.code, c.where)
		}
	}
	if _, err := st.Thread(context.Background(), "new1"); err == nil {
		t.Fatal("a refused put created its thread")
	}
}
