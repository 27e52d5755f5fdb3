package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	_ "github.com/cairn-dev/cairn/store/sqlite"
)

// tenantStores opens each backend the collision test runs on: memory,
// SQLite in a temporary file and PostgreSQL in a schema of its own (skipped
// without CAIRN_TEST_POSTGRES).
func tenantStores() map[string]func(t *testing.T) store.Store {
	open := func(t *testing.T, url string) store.Store {
		s, err := store.Open(context.Background(), url, store.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return inmem.Open(store.Options{}) },
		"sqlite": func(t *testing.T) store.Store { return open(t, "sqlite:"+filepath.Join(t.TempDir(), "c.db")) },
		"postgres": func(t *testing.T) store.Store {
			dsn, _ := pgtest.Schema(t, "cairn_tenants")
			return open(t, dsn)
		},
	}
}

// tenantCaller calls the API as one tenant; every answer is checked for
// the other tenant's name and for a thread key (a tenant's id with its
// tenant), which no answer may show.
type tenantCaller struct {
	t          *testing.T
	url, key   string
	name, peer string
}

func (c tenantCaller) call(method, path, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	s := string(b)
	if strings.Contains(s, c.peer) || strings.Contains(s, c.name+"/") {
		i := max(strings.Index(s, c.peer), strings.Index(s, c.name+"/"))
		c.t.Fatalf("%s %s as %s shows another tenant or a thread key: …%.300s", method, path, c.name, s[max(0, i-200):])
	}
	return res.StatusCode, s
}

// must calls and fails unless the answer has the status want.
func (c tenantCaller) must(want int, method, path, body string) string {
	c.t.Helper()
	code, b := c.call(method, path, body)
	if code != want {
		c.t.Fatalf("%s %s as %s: %d, want %d: %.400s", method, path, c.name, code, want, b)
	}
	return b
}

// TestTenantsOwnTheirIDs: two tenants use the same thread ids on every
// route that takes or creates one — threads, runs (also created by
// if_not_exists), assistants made from a graph (ids, versions, runs),
// copies, state, history, storage, interrupts and their
// answers, searches, the LangGraph checkpointer (put, get, list, copy,
// delete, prune) — on every backend: each has its own thread, neither
// sees or touches the other's, and no answer names the other tenant or
// shows a thread's key.
func TestTenantsOwnTheirIDs(t *testing.T) {
	for name, open := range tenantStores() {
		t.Run(name, func(t *testing.T) {
			a, b := tenantPair(t, open(t))
			sharedThreads(t, a, b)
			sharedRuns(t, a, b)
			sharedCheckpointer(t, a, b)
			sharedDelete(t, a, b)
			sharedAssistants(t, a, b)
		})
	}
}

func tenantPair(t *testing.T, s store.Store) (tenantCaller, tenantCaller) {
	ctx := context.Background()
	ks, err := store.KeysOf(s)
	if err != nil {
		t.Fatal(err)
	}
	keyA, _, err := server.NewKey(ctx, ks, "acme", "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyB, _, err := server.NewKey(ctx, ks, "globex", "b", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv, err := server.New(server.Config{Store: s, Keys: ks, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	url := newHTTP(t, srv)
	return tenantCaller{t, url, keyA, "acme", "globex"}, tenantCaller{t, url, keyB, "globex", "acme"}
}

// field reads a top-level string field of a JSON object.
func field(t *testing.T, body, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%v: %.300s", err, body)
	}
	s, _ := m[name].(string)
	return s
}

func sharedThreads(t *testing.T, a, b tenantCaller) {
	for _, c := range []tenantCaller{a, b} {
		got := c.must(200, "POST", "/threads", `{"thread_id": "t-shared", "metadata": {"owner": "`+c.name+`"}}`)
		if field(t, got, "thread_id") != "t-shared" {
			t.Fatalf("created as %s: %s", c.name, got)
		}
	}
	a.must(409, "POST", "/threads", `{"thread_id": "t-shared"}`)
	if got := a.must(200, "POST", "/threads", `{"thread_id": "t-shared", "if_exists": "do_nothing"}`); !strings.Contains(got, `"owner":"acme"`) {
		t.Fatalf("do_nothing answers the tenant's own thread: %s", got)
	}
	for _, c := range []tenantCaller{a, b} {
		c.must(200, "PATCH", "/threads/t-shared", `{"metadata": {"patched": "`+c.name+`"}}`)
		got := c.must(200, "GET", "/threads/t-shared", "")
		if !strings.Contains(got, `"owner":"`+c.name+`"`) || !strings.Contains(got, `"patched":"`+c.name+`"`) {
			t.Fatalf("GET as %s: %s", c.name, got)
		}
		found := c.must(200, "POST", "/threads/search", `{"ids": ["t-shared"]}`)
		if strings.Count(found, `"thread_id":"t-shared"`) != 1 {
			t.Fatalf("search by id as %s: %s", c.name, found)
		}
		if n := c.must(200, "POST", "/threads/count", `{"metadata": {"owner": "`+c.name+`"}}`); strings.TrimSpace(n) != "1" {
			t.Fatalf("count as %s: %s", c.name, n)
		}
	}
}

func sharedRuns(t *testing.T, a, b tenantCaller) {
	runs := map[string]string{}
	for _, c := range []tenantCaller{a, b} {
		c.must(200, "POST", "/threads/t-shared/runs/wait", `{"assistant_id": "drafts", "input": {}}`)
		c.must(200, "POST", "/threads/t-made/runs/wait", `{"assistant_id": "drafts", "input": {}, "if_not_exists": "create"}`)
		var list []map[string]any
		_ = json.Unmarshal([]byte(c.must(200, "GET", "/threads/t-shared/runs", "")), &list)
		if len(list) != 1 || list[0]["thread_id"] != "t-shared" {
			t.Fatalf("runs as %s: %v", c.name, list)
		}
		runs[c.name] = list[0]["run_id"].(string)
		st := c.must(200, "GET", "/threads/t-shared/state", "")
		if !strings.Contains(st, `"thread_id":"t-shared"`) || !strings.Contains(st, "draft 3") {
			t.Fatalf("state as %s: %.400s", c.name, st)
		}
		c.must(200, "POST", "/threads/t-shared/history", `{"limit": 2}`)
		if got := c.must(200, "GET", "/threads/t-shared/storage", ""); field(t, got, "thread_id") != "t-shared" {
			t.Fatalf("storage as %s: %s", c.name, got)
		}
		got := c.must(200, "POST", "/threads/t-shared/copy", "")
		if field(t, got, "thread_id") == "t-shared" {
			t.Fatalf("copy as %s: %s", c.name, got)
		}
		sameHistory(t, c, "t-shared", field(t, got, "thread_id"))
	}
	for _, c := range []tenantCaller{a, b} {
		modes := `"stream_mode": ["values", "updates", "messages-tuple", "debug", "checkpoints", "tasks"]`
		if got := c.must(200, "POST", "/threads/t-made/runs/stream", `{"assistant_id": "drafts", "input": {}, `+modes+`}`); !strings.Contains(got, `"thread_id":"t-made"`) {
			t.Fatalf("stream as %s: %.400s", c.name, got)
		}
		c.must(200, "POST", "/runs/wait", `{"assistant_id": "drafts", "input": {}}`)
		c.must(200, "POST", "/runs/stream", `{"assistant_id": "drafts", "input": {}, `+modes+`}`)
	}
	// Each tenant's run is its own: the other's run id is not found on
	// the same thread id.
	a.must(404, "GET", "/threads/t-shared/runs/"+runs["globex"], "")
	b.must(404, "GET", "/threads/t-shared/runs/"+runs["acme"], "")
	ids := map[string]string{}
	for _, c := range []tenantCaller{a, b} {
		var pending []map[string]any
		_ = json.Unmarshal([]byte(c.must(200, "GET", "/threads/t-shared/interrupts", "")), &pending)
		if len(pending) != 1 || pending[0]["thread_id"] != "t-shared" {
			t.Fatalf("interrupts as %s: %v", c.name, pending)
		}
		ids[c.name] = pending[0]["interrupt_id"].(string)
	}
	if ids["acme"] == ids["globex"] {
		t.Fatal("two tenants' interrupts on the same thread id have the same id")
	}
	if code, _ := b.call("POST", "/threads/t-shared/interrupts/"+ids["acme"]+"/answer", `{"action": "approve"}`); code == 200 {
		t.Fatal("globex answered acme's interrupt")
	}
	// The answer starts a run; join that one (the thread is busy until it
	// ends, and the tests after delete the thread). Its node wants a bool
	// and gets the approval, so the run fails: its error names the step,
	// by the id the tenant knows, never by the thread's key.
	answered := a.must(200, "POST", "/threads/t-shared/interrupts/"+ids["acme"]+"/answer", `{"action": "approve"}`)
	a.must(200, "GET", "/threads/t-shared/runs/"+field(t, answered, "run_id")+"/join", "")
	if got := b.must(200, "GET", "/threads/t-shared", ""); !strings.Contains(got, `"interrupted"`) {
		t.Fatalf("globex's thread after acme's answer: %s", got)
	}
}

// sameHistory fails unless the copy holds as many checkpoints as the
// thread it was copied from, the whole history, with the same values.
func sameHistory(t *testing.T, c tenantCaller, orig, copied string) {
	t.Helper()
	var a, b []map[string]any
	_ = json.Unmarshal([]byte(c.must(200, "POST", "/threads/"+orig+"/history", `{"limit": 100}`)), &a)
	_ = json.Unmarshal([]byte(c.must(200, "POST", "/threads/"+copied+"/history", `{"limit": 100}`)), &b)
	if len(a) < 3 || len(a) != len(b) {
		t.Fatalf("the copy as %s has %d checkpoints, the thread %d", c.name, len(b), len(a))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i]["values"], b[i]["values"]) || !reflect.DeepEqual(a[i]["tasks"], b[i]["tasks"]) {
			t.Fatalf("checkpoint %d of the copy as %s: %v, was %v", i, c.name, b[i], a[i])
		}
		ma, mb := a[i]["metadata"].(map[string]any), b[i]["metadata"].(map[string]any)
		if ma["run_id"] != mb["run_id"] || ma["assistant_id"] != mb["assistant_id"] || ma["graph_id"] != mb["graph_id"] {
			t.Fatalf("checkpoint %d's metadata in the copy as %s: %v, was %v", i, c.name, mb, ma)
		}
	}
}

func sharedCheckpointer(t *testing.T, a, b tenantCaller) {
	const cp0 = "1f000000-0000-6000-8000-000000000000"
	for i, c := range []tenantCaller{a, b} {
		cp1 := fmt.Sprintf("1f000000-0000-6000-8000-00000000000%d", 1+i) // each tenant's own head
		c.must(200, "POST", "/checkpointer/put", lgPutBody("lg-shared", cp0, "", 0))
		c.must(200, "POST", "/checkpointer/put", lgPutBody("lg-shared", cp1, cp0, 1))
		got := c.must(200, "POST", "/checkpointer/get", `{"thread_id": "lg-shared"}`)
		if !strings.Contains(got, cp1) || !strings.Contains(got, `"thread_id":"lg-shared"`) {
			t.Fatalf("get as %s: %.300s", c.name, got)
		}
		if got := c.must(200, "POST", "/checkpointer/list", `{"thread_id": "lg-shared"}`); strings.Count(got, `"checkpoint_id"`) != 2 {
			t.Fatalf("list as %s: %.300s", c.name, got)
		}
		if got := c.must(200, "POST", "/checkpointer/threads/lg-shared/copy", `{"target_thread_id": "lg-copy"}`); field(t, got, "thread_id") != "lg-copy" {
			t.Fatalf("checkpointer copy as %s: %s", c.name, got)
		}
	}
	a.must(200, "DELETE", "/checkpointer/threads/lg-shared", "")
	a.must(404, "POST", "/checkpointer/get", `{"thread_id": "lg-shared"}`)
	b.must(200, "POST", "/checkpointer/get", `{"thread_id": "lg-shared"}`)
	got := a.must(200, "POST", "/checkpointer/prune", `{"thread_ids": ["lg-copy"], "strategy": "delete"}`)
	if !strings.Contains(got, `"deleted":["lg-copy"]`) {
		t.Fatalf("prune as acme: %s", got)
	}
	b.must(200, "POST", "/checkpointer/get", `{"thread_id": "lg-copy"}`)
}

func sharedDelete(t *testing.T, a, b tenantCaller) {
	a.must(204, "DELETE", "/threads/t-shared", "")
	a.must(404, "GET", "/threads/t-shared", "")
	b.must(200, "GET", "/threads/t-shared", "")
	a.must(200, "POST", "/threads", `{"thread_id": "t-shared"}`)
	if got := b.must(200, "GET", "/threads/t-shared", ""); !strings.Contains(got, `"owner":"globex"`) {
		t.Fatalf("globex's thread after acme re-created its own: %s", got)
	}
}

// sharedAssistants: both tenants make an assistant of the same id; each
// sees, updates, runs and deletes its own, never the other's, and a
// search lists the system assistants and the caller's alone.
func sharedAssistants(t *testing.T, a, b tenantCaller) {
	for _, c := range []tenantCaller{a, b} {
		c.must(200, "POST", "/assistants", `{"assistant_id": "asst-shared", "graph_id": "drafts", "name": "`+c.name+`", "metadata": {"owner": "`+c.name+`"}}`)
	}
	a.must(200, "PATCH", "/assistants/asst-shared", `{"metadata": {"v": 2}}`)
	for _, c := range []tenantCaller{a, b} {
		if got := c.must(200, "GET", "/assistants/asst-shared", ""); field(t, got, "name") != c.name {
			t.Fatalf("%s reads %s", c.name, got)
		}
		var list []map[string]any
		_ = json.Unmarshal([]byte(c.must(200, "POST", "/assistants/search", `{"limit": 100}`)), &list)
		if len(list) != 2 {
			t.Fatalf("%s lists %v (want drafts and its own)", c.name, list)
		}
		for _, x := range list {
			if md, _ := x["metadata"].(map[string]any); md["owner"] != nil && md["owner"] != c.name {
				t.Fatalf("%s lists the other's assistant: %v", c.name, x)
			}
		}
		c.must(200, "POST", "/threads/t-asst/runs/wait", `{"assistant_id": "asst-shared", "input": {}, "if_not_exists": "create"}`)
	}
	var versions []map[string]any
	_ = json.Unmarshal([]byte(b.must(200, "POST", "/assistants/asst-shared/versions", `{}`)), &versions)
	if len(versions) != 1 {
		t.Fatalf("globex's assistant has %d versions; acme's update touched it", len(versions))
	}
	a.must(200, "DELETE", "/assistants/asst-shared?delete_threads=true", "")
	a.must(404, "GET", "/assistants/asst-shared", "")
	a.must(404, "GET", "/threads/t-asst", "")
	b.must(200, "GET", "/assistants/asst-shared", "")
	b.must(200, "GET", "/threads/t-asst", "")
	b.must(200, "DELETE", "/assistants/asst-shared", "")
}
