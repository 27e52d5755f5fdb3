package server_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

var (
	taskIDs = regexp.MustCompile(`"id":"[0-9a-f]{32}"`)
	runIDs  = regexp.MustCompile(`"run_id":"[0-9a-f-]{36}"`)
)

// TestBundleRoutes: GET /threads/{id}/bundle and POST /threads/import
// with two tenants' keys. A tenant's bundle of its thread, paused at an
// interrupt with a run, imports for another tenant under the same id and
// reads the same there (state, history, runs); the importing key's tenant
// owns it. Another tenant's thread is a 404 as a missing one is; the id
// taken is a 409, ?as= another id; a damaged, cut or empty body is a 422
// and creates nothing.
func TestBundleRoutes(t *testing.T) {
	ta, tb := tenantPair(t, inmem.Open(store.Options{}))
	keyA, keyB, hs := ta.key, tb.key, ta.url
	call := func(key, method, path string, body []byte) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, hs+path, bytes.NewReader(body))
		req.Header.Set("x-api-key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	if code, b, _ := call(keyA, "POST", "/threads", []byte(`{"thread_id": "a1", "metadata": {"team": "red"}}`)); code != 200 {
		t.Fatalf("create: %d %s", code, b)
	}
	if code, b, _ := call(keyA, "POST", "/threads/a1/runs/wait", []byte(`{"assistant_id": "drafts", "input": {}}`)); code != 200 || !strings.Contains(b, "__interrupt__") {
		t.Fatalf("run: %d %s", code, b)
	}
	code, bundle, hdr := call(keyA, "GET", "/threads/a1/bundle", nil)
	if code != 200 || !strings.HasPrefix(bundle, "CAIRNBDL") || hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("bundle: %d %s %v", code, hdr, bundle[:min(len(bundle), 200)])
	}
	read := func(key, id string) string {
		t.Helper()
		var all strings.Builder
		for _, p := range []string{"/threads/" + id + "/state", "/threads/" + id + "/history"} {
			code, b, _ := call(key, "GET", p, nil)
			if code != 200 {
				t.Fatalf("%s: %d %s", p, code, b)
			}
			all.WriteString(b)
		}
		code, b, _ := call(key, "GET", "/threads/"+id+"/runs", nil)
		if code != 200 || strings.Count(b, `"run_id"`) != 1 {
			t.Fatalf("runs of %s: %d %s", id, code, b)
		}
		// Task and interrupt ids derive from the thread's key, which
		// names its tenant; the runs of an import into the store they
		// came from have ids of their own.
		return runIDs.ReplaceAllString(taskIDs.ReplaceAllString(all.String(), `"id":""`), `"run_id":""`)
	}
	want := read(keyA, "a1")

	// Another tenant cannot read it: the answer of a missing thread.
	codeB, bodyB, _ := call(keyB, "GET", "/threads/a1/bundle", nil)
	codeM, bodyM, _ := call(keyB, "GET", "/threads/zz/bundle", nil)
	if codeB != 404 || codeM != 404 || strings.ReplaceAll(bodyB, "a1", "zz") != bodyM {
		t.Fatalf("another tenant's bundle: %d %s / %d %s", codeB, bodyB, codeM, bodyM)
	}

	// B imports A's bundle: its own thread a1, the same history.
	code, b, _ := call(keyB, "POST", "/threads/import", []byte(bundle))
	if code != 201 || !strings.Contains(b, `"thread_id":"a1"`) || !strings.Contains(b, `"team":"red"`) {
		t.Fatalf("import: %d %s", code, b)
	}
	if got := read(keyB, "a1"); got != want {
		t.Fatalf("imported thread differs:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range []struct {
		key, path string
		body      []byte
		code      int
	}{
		{keyA, "/threads/import", []byte(bundle), 409},
		{keyB, "/threads/import", []byte(bundle), 409},
		{keyA, "/threads/import?as=a2", []byte(bundle), 201},
		{keyA, "/threads/import?as=bad%2Fid", []byte(bundle), 422},
		{keyA, "/threads/import?as=a3", []byte(bundle[:len(bundle)-1]), 422},
		{keyA, "/threads/import?as=a3", append([]byte(bundle[:40]), bundle[41:]...), 422},
		{keyA, "/threads/import?as=a3", nil, 422},
	} {
		if code, b, _ := call(c.key, "POST", c.path, c.body); code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.path, code, b, c.code)
		}
	}
	if got := strings.ReplaceAll(read(keyA, "a2"), "a2", "a1"); got != want {
		t.Fatalf("a2 differs:\n%s\nwant:\n%s", got, want)
	}
	if code, _, _ := call(keyA, "GET", "/threads/a3", nil); code != 404 {
		t.Fatalf("a refused import made a3: %d", code)
	}
	if got := read(keyA, "a1"); got != want {
		t.Fatal("the source thread changed")
	}
}
