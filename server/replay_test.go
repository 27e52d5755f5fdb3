package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
)

// replayServer serves the agent file in dir over s to tenants acme and
// globex.
func replayServer(t *testing.T, s store.Store, dir string) (tenantCaller, tenantCaller) {
	t.Helper()
	ctx := context.Background()
	asst, err := runs.LoadAssistant(filepath.Join(dir, "reader.md"), runs.AssistantConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := store.KeysOf(s)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		if keys[tenant], _, err = server.NewKey(ctx, ks, tenant, tenant+"-"+time.Now().Format("150405.000000"), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(server.Config{Store: s, Keys: ks, Assistants: []runs.Assistant{asst}})
	if err != nil {
		t.Fatal(err)
	}
	url := newHTTP(t, srv)
	return tenantCaller{t, url, keys["acme"], "acme", "globex"}, tenantCaller{t, url, keys["globex"], "globex", "acme"}
}

type replayReport struct {
	Thread      string `json:"thread"`
	Into        string `json:"into"`
	Matched     bool   `json:"matched"`
	Checkpoints int    `json:"checkpoints"`
	Departure   *struct {
		Seq  int64 `json:"seq"`
		Call *struct {
			Kind string            `json:"kind"`
			Diff []json.RawMessage `json:"diff"`
		} `json:"call"`
	} `json:"departure"`
}

func decodeReport(t *testing.T, body string) replayReport {
	t.Helper()
	var r replayReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v: %.400s", err, body)
	}
	return r
}

// TestReplayRoute: POST /threads/{id}/replay answers the report — a
// recorded thread matches; into writes a new thread of the tenant's own
// (the other tenant may use the same id, and sees neither); the same
// store served with an edited prompt departs at the step whose request
// changed. Another tenant's thread is not found, bad bodies are 422 and
// an existing into is 409, and none of them writes anything.
func TestReplayRoute(t *testing.T) {
	for name, open := range tenantStores() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir() // the agent file of replay's tests, with a tool, its script and notes
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "replay", "testdata", "reader"))); err != nil {
				t.Fatal(err)
			}
			s := open(t)
			a, b := replayServer(t, s, dir)
			a.must(200, "POST", "/threads/t1/runs/wait", `{"assistant_id": "reader", "input": "go", "if_not_exists": "create"}`)
			b.must(200, "POST", "/threads/only-b/runs/wait", `{"assistant_id": "reader", "input": "go", "if_not_exists": "create"}`)

			if r := decodeReport(t, a.must(200, "POST", "/threads/t1/replay", `{}`)); !r.Matched || r.Thread != "t1" || r.Checkpoints != 2 {
				t.Fatalf("replay: %+v", r)
			}
			before := a.must(200, "POST", "/threads/t1/history", `{}`)
			if r := decodeReport(t, a.must(200, "POST", "/threads/t1/replay", `{"into": "t1-new"}`)); !r.Matched || r.Into != "t1-new" {
				t.Fatalf("replay into: %+v", r)
			}
			if h := a.must(200, "POST", "/threads/t1-new/history", `{}`); strings.Count(h, `"checkpoint_id"`) < 2 {
				t.Fatalf("the new thread's history: %.400s", h)
			}
			b.must(404, "GET", "/threads/t1-new", "")
			b.must(404, "POST", "/threads/t1/replay", `{}`)
			a.must(404, "POST", "/threads/only-b/replay", `{}`)
			b.must(200, "POST", "/threads/only-b/replay", `{"into": "t1-new"}`) // globex's own t1-new
			for _, body := range []string{`{"from": -1}`, `{"from": 99}`, `{"into": "a/b"}`, `{"into": "t1"}`, `{"froms": 1}`} {
				a.must(422, "POST", "/threads/t1/replay", body)
			}
			a.must(409, "POST", "/threads/t1/replay", `{"into": "t1-new"}`)
			if after := a.must(200, "POST", "/threads/t1/history", `{}`); after != before {
				t.Fatalf("replay changed the thread it replayed:\n%s\n%s", before, after)
			}

			orig, err := os.ReadFile(filepath.Join(dir, "reader.md"))
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(orig), "say what it holds", "summarise it", 1)
			if err := os.WriteFile(filepath.Join(dir, "reader.md"), []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			a2, _ := replayServer(t, s, dir)
			r := decodeReport(t, a2.must(200, "POST", "/threads/t1/replay", `{}`))
			if r.Matched || r.Departure == nil || r.Departure.Seq != 2 || r.Departure.Call == nil || r.Departure.Call.Kind != "model" ||
				!strings.Contains(string(mustMarshal(r.Departure.Call.Diff)), "summarise it") {
				t.Fatalf("replay after a prompt edit: %+v", r)
			}
		})
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
