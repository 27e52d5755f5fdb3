package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// approvalGraph writes drafts, then asks for approval (flow.Interrupt);
// calls counts the drafts written, across runs.
func approvalGraph(t *testing.T, calls *atomic.Int64, delay time.Duration) *runs.Graph {
	t.Helper()
	schema := state.MustSchema(state.WithField("drafts", state.ReducerAppend), state.WithField("approved", state.ReducerReplace))
	g := flow.NewGraph(schema).
		AddNode("write", func(ctx context.Context, s state.Doc) (state.Update, error) {
			calls.Add(1)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			n, _ := s.ListLen("drafts")
			return state.Update{"drafts": fmt.Sprintf("draft %d", n+1)}, nil
		}).
		AddNode("approve", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var ok bool
			if err := flow.Interrupt(ctx, "publish?", &ok); err != nil {
				return nil, err
			}
			return state.Update{"approved": ok}, nil
		}).
		AddEdge(flow.START, "write").
		AddRouter("write", func(ctx context.Context, s state.Doc) ([]flow.Target, error) {
			if n, _ := s.ListLen("drafts"); n < 3 {
				return flow.To("write"), nil
			}
			return flow.To("approve"), nil
		}).
		AddEdge("approve", flow.END)
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "drafts", Graph: c}
}

type testServer struct {
	t   *testing.T
	srv *server.Server
	url string
	key string // an API key sent with each request, when set
}

// newHTTP serves srv on a test listener (started, closed at cleanup).
func newHTTP(t *testing.T, srv *server.Server) string {
	t.Helper()
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs.URL
}

func newServer(t *testing.T, s store.Store, as ...runs.Assistant) *testServer {
	t.Helper()
	srv, err := server.New(server.Config{Store: s, Assistants: as, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return &testServer{t: t, srv: srv, url: hs.URL}
}

// do sends a request (body: a JSON value, or a string sent as is) and
// returns the status and the answer.
func (ts *testServer) do(method, path string, body any) (int, []byte) {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, ts.url+path, rd)
	if ts.key != "" {
		req.Header.Set("x-api-key", ts.key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

func (ts *testServer) json(method, path string, body any, want int) map[string]any {
	ts.t.Helper()
	code, b := ts.do(method, path, body)
	if code != want {
		ts.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, b)
	}
	var m map[string]any
	if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &m) != nil {
		var list []any
		if json.Unmarshal(b, &list) != nil {
			ts.t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
		m = map[string]any{"list": list}
	}
	return m
}

type sse struct {
	ID, Event string
	Data      json.RawMessage
}

// stream reads SSE events until the server ends the stream, or stop says so.
func (ts *testServer) stream(method, path string, body any, lastID string, stop func(sse) bool) []sse {
	ts.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, ts.url+path, rd)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		ts.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	var out []sse
	var cur sse
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(line[6:])
		case line == "" && cur.Event != "":
			out = append(out, cur)
			if stop != nil && stop(cur) {
				return out
			}
			cur = sse{}
		}
	}
	return out
}

func TestGraphRunInterruptResume(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	th := ts.json("POST", "/threads", map[string]any{"thread_id": "t1", "metadata": map[string]any{"team": "a"}}, 200)
	if th["thread_id"] != "t1" || th["status"] != "idle" {
		t.Fatalf("thread: %v", th)
	}
	evs := ts.stream("POST", "/threads/t1/runs/stream", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "stream_mode": []string{"updates", "checkpoints", "tasks"}}, "", nil)
	var names []string
	for _, e := range evs {
		names = append(names, e.Event)
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "metadata,checkpoints,checkpoints,tasks,tasks,updates,checkpoints") || !strings.Contains(got, "updates") {
		t.Fatalf("events: %s", got)
	}
	last := evs[len(evs)-1]
	if last.Event != "updates" || !strings.Contains(string(last.Data), `"__interrupt__"`) || !strings.Contains(string(last.Data), `"publish?"`) {
		t.Fatalf("last event: %s %s", last.Event, last.Data)
	}
	st := ts.json("GET", "/threads/t1/state", nil, 200)
	if fmt.Sprint(st["next"]) != "[approve]" {
		t.Fatalf("state: %v", st)
	}
	out := ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "drafts", "command": map[string]any{"resume": true}}, 200)
	if out["approved"] != true || fmt.Sprint(out["drafts"]) != "[draft 1 draft 2 draft 3]" || calls.Load() != 3 {
		t.Fatalf("after resume: %v (%d drafts written)", out, calls.Load())
	}
	// Fork from the checkpoint after the first draft, as "write": two more
	// drafts follow on the new branch.
	hist := ts.json("POST", "/threads/t1/history", map[string]any{"limit": 100}, 200)["list"].([]any)
	var afterFirst string
	for _, h := range hist {
		h := h.(map[string]any)
		if fmt.Sprint(h["values"].(map[string]any)["drafts"]) == "[draft 1]" {
			afterFirst = h["checkpoint"].(map[string]any)["checkpoint_id"].(string)
		}
	}
	upd := ts.json("POST", "/threads/t1/state", map[string]any{"values": map[string]any{"drafts": "edited"}, "checkpoint_id": afterFirst, "as_node": "write"}, 200)
	if upd["checkpoint"] == nil {
		t.Fatalf("update: %v", upd)
	}
	ts.json("POST", "/threads/t1/runs/wait", map[string]any{"assistant_id": "drafts"}, 200)
	st = ts.json("GET", "/threads/t1/state", nil, 200)
	if got := fmt.Sprint(st["values"].(map[string]any)["drafts"]); got != "[draft 1 edited draft 3]" {
		t.Fatalf("fork: drafts %s", got)
	}
}

// Events missed while a client was away come back on reconnect, once, in
// order; the run never runs a step again for it.
func TestStreamReconnect(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 30*time.Millisecond))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	first := ts.stream("POST", "/threads/t1/runs/stream", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "stream_mode": []string{"values", "updates"}}, "",
		func(e sse) bool { return e.Event == "updates" })
	run := map[string]any{}
	_ = json.Unmarshal(first[0].Data, &run)
	rid := run["run_id"].(string)
	lastID := first[len(first)-1].ID
	time.Sleep(100 * time.Millisecond) // the run goes on without its client
	rest := ts.stream("GET", "/threads/t1/runs/"+rid+"/stream", nil, lastID, nil)
	all := append(first, rest...)
	for i, e := range all {
		if want := fmt.Sprintf("%s:%d", rid, i+1); e.ID != want {
			t.Fatalf("event %d has id %s, want %s", i, e.ID, want)
		}
	}
	if calls.Load() != 3 {
		t.Fatalf("%d drafts written, want 3", calls.Load())
	}
	// "-1", which the SDK sends after a reload to rejoin a run it has seen
	// nothing of, is the start: the whole stream again.
	if again := ts.stream("GET", "/threads/t1/runs/"+rid+"/stream", nil, "-1", nil); len(again) != len(all) || again[0].ID != all[0].ID || again[len(again)-1].ID != all[len(all)-1].ID {
		t.Fatalf("Last-Event-ID -1: %d events, want the %d from the start", len(again), len(all))
	}
	if code, b := ts.do("GET", "/threads/t1/runs/"+rid+"/stream?stream_mode=bogus", nil); code != 422 {
		t.Fatalf("bad stream_mode: %d %s", code, b)
	}
	req, _ := http.NewRequest("GET", ts.url+"/threads/t1/runs/"+rid+"/stream", nil)
	req.Header.Set("Last-Event-ID", "other-run:3")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 422 {
		t.Fatalf("another run's event id: %d", res.StatusCode)
	}
}

// Bad requests get a 422 that says where, and store nothing.
func TestBadRequests(t *testing.T) {
	var calls atomic.Int64
	s := inmem.Open(store.Options{})
	ts := newServer(t, s, approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	for _, tc := range []struct {
		name, method, path string
		body               any
		code               int
		where              string
	}{
		{"bad JSON", "POST", "/threads", `{"thread_id": `, 422, "$"},
		{"unknown field", "POST", "/threads", map[string]any{"thread_id": "x", "colour": 1}, 422, "$.colour"},
		{"wrong type", "POST", "/threads/search", map[string]any{"limit": "ten"}, 422, "$.limit"},
		{"bad thread id", "POST", "/threads", map[string]any{"thread_id": "a b"}, 422, "$.thread_id"},
		{"nested unknown field", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "config": map[string]any{"recursion": 3}}, 422, "$.config.recursion"},
		{"unknown assistant", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "nope"}, 404, ""},
		{"bad stream mode", "POST", "/threads/t1/runs/stream", map[string]any{"assistant_id": "drafts", "stream_mode": []string{"values", "everything"}}, 422, "$.stream_mode[1]"},
		{"empty node name", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "interrupt_before": []string{""}}, 422, "$.interrupt_before[0]"},
		{"bad checkpoint", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "checkpoint_id": "abc"}, 422, "$.checkpoint_id"},
		{"bad webhook", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "webhook": "x"}, 422, "$.webhook"},
		{"bad strategy", "POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "multitask_strategy": "later"}, 422, "$.multitask_strategy"},
		{"missing thread", "POST", "/threads/nope/runs", map[string]any{"assistant_id": "drafts"}, 404, ""},
		{"missing thread state", "GET", "/threads/nope/state", nil, 404, ""},
		{"bad as_node", "POST", "/threads/t1/state", map[string]any{"values": map[string]any{}, "as_node": "nope"}, 409, ""},
		{"body too large", "POST", "/threads", `{"metadata": {"x": "` + strings.Repeat("a", 2<<20) + `"}}`, 413, ""},
		{"no route", "GET", "/nothing", nil, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do(tc.method, tc.path, tc.body)
			var e struct{ Detail, Path string }
			_ = json.Unmarshal(b, &e)
			if code != tc.code || e.Path != tc.where || e.Detail == "" {
				t.Fatalf("%d %s, want %d at %q", code, b, tc.code, tc.where)
			}
		})
	}
	// Nothing was created: one thread, no runs.
	n := 0
	for _, err := range s.Threads(context.Background(), store.ThreadFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	runs := ts.json("GET", "/threads/t1/runs", nil, 200)["list"].([]any)
	if n != 1 || len(runs) != 0 || calls.Load() != 0 {
		t.Fatalf("%d threads, %d runs, %d calls after bad requests", n, len(runs), calls.Load())
	}
}

// A server stopped in the middle of a run leaves it running in the store;
// the next server on the store finishes it without running a committed
// step again.
func TestRestartResumesRuns(t *testing.T) {
	var calls atomic.Int64
	s := inmem.Open(store.Options{})
	srv, err := server.New(server.Config{Store: s, Assistants: []runs.Assistant{approvalGraph(t, &calls, 150*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	ts := &testServer{t: t, srv: srv, url: hs.URL}
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	run := ts.json("POST", "/threads/t1/runs", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
	rid := run["run_id"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs.Close()
	if got := runStatusOf(t, s, rid); got != "running" {
		t.Fatalf("a stopped server's run is %s, want running", got)
	}
	before := calls.Load()
	ts = newServer(t, s, approvalGraph(t, &calls, 0))
	out := ts.json("GET", "/threads/t1/runs/"+rid+"/join", nil, 200)
	if fmt.Sprint(out["drafts"]) != "[draft 1 draft 2 draft 3]" || out["__interrupt__"] == nil {
		t.Fatalf("after restart: %v", out)
	}
	// The step in flight at the stop runs again (it had not committed);
	// the committed one does not.
	if again := calls.Load() - before; again != 3-(before-1) {
		t.Fatalf("%d drafts written after the restart, %d before", again, before)
	}
}

func runStatusOf(t *testing.T, s store.Store, run string) string {
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rl.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}
