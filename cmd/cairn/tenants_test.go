package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// TestQueuedTenants: with --queue and --auth keys, two tenants run the
// same thread id through workers; each run runs on its own tenant's
// thread (the worker loads it by its key), each stream and state shows the
// tenant's own id, and the CLI names the threads by their keys.
func TestQueuedTenants(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_qt")
	assistants := filepath.Join("..", "..", "examples", "serve")
	keys := map[string]string{"acme": tenantKey(t, dsn, "acme"), "globex": tenantKey(t, dsn, "globex")}
	p := startServe(t, "--queue", "--auth", "keys", "--assistants", assistants, "--store", dsn)
	startWorker(t, "--id", "w1", "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	call := func(tenant, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		req.Header.Set("x-api-key", keys[tenant])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for tenant, other := range map[string]string{"acme": "globex", "globex": "acme"} {
		body := `{"assistant_id": "five-steps", "input": "from ` + tenant + `", "if_not_exists": "create", "stream_mode": ["values", "updates", "tasks"]}`
		code, out := call(tenant, "POST", "/threads/same/runs/stream", body)
		if code != 200 || !strings.Contains(out, `"thread_id":"same"`) || strings.Contains(out, other) || strings.Contains(out, tenant+"/") {
			t.Fatalf("stream as %s: %d %.600s", tenant, code, out)
		}
		code, st := call(tenant, "GET", "/threads/same/state", "")
		if code != 200 || !strings.Contains(st, "from "+tenant) || strings.Contains(st, "from "+other) {
			t.Fatalf("state as %s: %d %.600s", tenant, code, st)
		}
	}
	code, out, errOut := cli(t, nil, "threads", "--store", dsn)
	if code != 0 || !strings.Contains(out, "acme/same") || !strings.Contains(out, "globex/same") {
		t.Fatalf("cairn threads: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := cli(t, nil, "state", "globex/same", "--store", dsn); code != 0 || !strings.Contains(out, "from globex") {
		t.Fatalf("cairn state globex/same: %d %s %s", code, out, errOut)
	}
}
