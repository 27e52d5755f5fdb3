package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// headCounter is a memory backend that counts the head reads (the newest
// root checkpoint of a thread) its engine makes.
type headCounter struct {
	*inmem.Backend
	heads atomic.Int64
}

func (h *headCounter) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	if q.Namespace == "" && q.Desc && q.Limit == 1 {
		h.heads.Add(1)
	}
	return h.Backend.Rows(ctx, q)
}

// search posts a thread search and returns the ids listed and the
// pagination headers.
func (ts *testServer) search(body string) (ids []string, total, next string) {
	ts.t.Helper()
	res, err := http.Post(ts.url+"/threads/search", "application/json", strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var list []struct {
		ThreadID string `json:"thread_id"`
		Status   string `json:"status"`
	}
	if res.StatusCode != 200 || json.Unmarshal(b, &list) != nil {
		ts.t.Fatalf("search %s: %d %s", body, res.StatusCode, b)
	}
	for _, th := range list {
		ids = append(ids, th.ThreadID)
	}
	return ids, res.Header.Get("X-Pagination-Total"), res.Header.Get("X-Pagination-Next")
}

func (ts *testServer) count(body string) int {
	ts.t.Helper()
	code, b := ts.do("POST", "/threads/count", body)
	var n int
	if code != 200 || json.Unmarshal(b, &n) != nil {
		ts.t.Fatalf("count %s: %d %s", body, code, b)
	}
	return n
}

// seedThreads creates n threads (u0…u4 in metadata "user", one checkpoint
// each), oldest first: t00, t01, …
func seedThreads(t *testing.T, s store.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("t%02d", i)
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Metadata: map[string]any{"user": fmt.Sprintf("u%d", i%5)}}); err != nil {
			t.Fatal(err)
		}
		d, p, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: id, Patch: p, State: d}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestThreadSearchPages: a search pages through the thread index, newest
// first by default, and a page of n threads reads n heads however many
// threads the store holds; counts, totals and the next offset agree with
// the pages; filters by metadata, ids and status, and each order, list
// what a scan would.
func TestThreadSearchPages(t *testing.T) {
	hc := &headCounter{Backend: inmem.New()}
	s := store.New(hc, store.Options{})
	ids := seedThreads(t, s, 60)
	ts := newServer(t, s)
	newest := slices.Clone(ids)
	slices.Reverse(newest)

	hc.heads.Store(0)
	got, total, next := ts.search(`{"limit": 10}`)
	if fmt.Sprint(got) != fmt.Sprint(newest[:10]) || total != "60" || next != "10" {
		t.Fatalf("first page: %v total %s next %s", got, total, next)
	}
	if n := hc.heads.Load(); n != 10 {
		t.Fatalf("a page of 10 read %d heads", n)
	}
	var all []string
	for off := 0; off < 60; off += 25 {
		page, _, _ := ts.search(fmt.Sprintf(`{"limit": 25, "offset": %d}`, off))
		all = append(all, page...)
	}
	if fmt.Sprint(all) != fmt.Sprint(newest) {
		t.Fatalf("paged: %v", all)
	}
	if got, _, next := ts.search(`{"limit": 10, "offset": 55}`); len(got) != 5 || next != "" {
		t.Fatalf("last page: %v next %q", got, next)
	}
	u2, total, _ := ts.search(`{"metadata": {"user": "u2"}, "limit": 3}`)
	if fmt.Sprint(u2) != "[t57 t52 t47]" || total != "12" || ts.count(`{"metadata": {"user": "u2"}}`) != 12 {
		t.Fatalf("metadata u2: %v total %s", u2, total)
	}
	if got, _, _ := ts.search(`{"metadata": {"user": null}, "limit": 3}`); len(got) != 0 {
		t.Fatalf("user absent or null: %v", got)
	}
	if got, _, _ := ts.search(`{"ids": ["t03", "t07", "t40", "nope"], "sort_by": "thread_id"}`); fmt.Sprint(got) != "[t03 t07 t40]" {
		t.Fatalf("ids by thread id: %v", got)
	}
	if got, _, _ := ts.search(`{"limit": 3, "sort_by": "thread_id", "sort_order": "desc"}`); fmt.Sprint(got) != "[t59 t58 t57]" {
		t.Fatalf("by id, descending: %v", got)
	}
	if got, _, _ := ts.search(`{"limit": 2, "sort_by": "updated_at", "sort_order": "asc"}`); fmt.Sprint(got) != "[t00 t01]" {
		t.Fatalf("by update time: %v", got)
	}
	if got, total, _ := ts.search(`{"limit": 0}`); len(got) != 0 || total != "60" {
		t.Fatalf("limit 0: %v total %s", got, total)
	}
	if ts.count(`{}`) != 60 || ts.count(`{"status": "interrupted"}`) != 0 || ts.count(`{"status": "idle"}`) != 60 {
		t.Fatal("counts by status")
	}
}

// TestThreadSearchBusy: a thread with a run is busy: a status filter of
// busy lists it alone, idle leaves it out, and a sort by status puts it
// first (ascending) or last (descending); an interrupted thread is listed
// by its status, and values filters read the candidates' states.
func TestThreadSearchBusy(t *testing.T) {
	var calls atomic.Int64
	slow := approvalGraph(t, &calls, 3*time.Second)
	slow.ID = "slow"
	pause := approvalGraph(t, &calls, 0)
	s := inmem.Open(store.Options{})
	seedThreads(t, s, 6)
	ts := newServer(t, s, slow, pause)
	ts.json("POST", "/threads", map[string]any{"thread_id": "paused", "metadata": map[string]any{"user": "u9"}}, 200)
	ts.json("POST", "/threads/paused/runs/wait", map[string]any{"assistant_id": "drafts"}, 200)
	ts.json("POST", "/threads", map[string]any{"thread_id": "running"}, 200)
	ts.json("POST", "/threads/running/runs", map[string]any{"assistant_id": "slow"}, 200)

	if got, total, _ := ts.search(`{"status": "busy"}`); fmt.Sprint(got) != "[running]" || total != "1" {
		t.Fatalf("busy: %v total %s", got, total)
	}
	if got, _, _ := ts.search(`{"status": "interrupted"}`); fmt.Sprint(got) != "[paused]" {
		t.Fatalf("interrupted: %v", got)
	}
	if got, _, _ := ts.search(`{"status": "idle", "limit": 100}`); len(got) != 6 || slices.Contains(got, "running") {
		t.Fatalf("idle: %v", got)
	}
	asc, _, _ := ts.search(`{"sort_by": "status", "sort_order": "asc", "limit": 100}`)
	if fmt.Sprint(asc) != "[running t00 t01 t02 t03 t04 t05 paused]" {
		t.Fatalf("by status, ascending: %v", asc)
	}
	desc, total, _ := ts.search(`{"sort_by": "status", "limit": 100}`)
	if fmt.Sprint(desc) != "[paused t05 t04 t03 t02 t01 t00 running]" || total != "8" {
		t.Fatalf("by status, descending: %v total %s", desc, total)
	}
	var pages []string
	for off := 0; off < 8; off += 3 {
		page, _, _ := ts.search(fmt.Sprintf(`{"sort_by": "status", "limit": 3, "offset": %d}`, off))
		pages = append(pages, page...)
	}
	if fmt.Sprint(pages) != fmt.Sprint(desc) {
		t.Fatalf("by status in pages of 3: %v", pages)
	}
	if ts.count(`{"status": "busy"}`) != 1 || ts.count(`{"status": "idle"}`) != 6 || ts.count(`{"status": "interrupted"}`) != 1 {
		t.Fatal("counts by status")
	}
	if got, _, _ := ts.search(`{"values": {"n": 3}}`); fmt.Sprint(got) != "[t03]" || ts.count(`{"values": {"n": 3}}`) != 1 {
		t.Fatalf("values n=3: %v", got)
	}
	if got, _, _ := ts.search(`{"values": {"drafts": ["draft 1", "draft 2", "draft 3"]}, "metadata": {"user": "u9"}}`); fmt.Sprint(got) != "[paused]" {
		t.Fatalf("values drafts: %v", got)
	}
}

// TestThreadSearchValuesBound: a values filter reads the state of every
// thread the other filters select, so a search whose other filters select
// too many is refused, naming $.values, and one they narrow is answered.
func TestThreadSearchValuesBound(t *testing.T) {
	s := inmem.Open(store.Options{})
	ctx := context.Background()
	for i := 0; i <= 10_000; i++ {
		md := map[string]any{"batch": "big"}
		if i%1000 == 0 {
			md["batch"] = "small"
		}
		if _, err := s.CreateThread(ctx, store.Thread{ID: fmt.Sprintf("v%05d", i), Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	ts := newServer(t, s)
	for _, path := range []string{"/threads/search", "/threads/count"} {
		code, b := ts.do("POST", path, `{"values": {"n": 1}}`)
		if code != 422 || !strings.Contains(string(b), "$.values") {
			t.Fatalf("%s with values over 10,001 threads: %d %s", path, code, b)
		}
	}
	if n := ts.count(`{"values": {}, "metadata": {"batch": "small"}}`); n != 11 {
		t.Fatalf("narrowed count: %d", n)
	}
	if n := ts.count(`{"values": {"n": 1}, "metadata": {"batch": "small"}}`); n != 0 {
		t.Fatalf("narrowed count of n=1: %d", n)
	}
}

// TestInboxPages: the approvals inbox lists pauses oldest first through
// the thread index, filtered by scalar and object metadata and by
// assistant, in pages, reading only the heads it lists.
func TestInboxPages(t *testing.T) {
	var calls atomic.Int64
	pause := approvalGraph(t, &calls, 0)
	other := approvalGraph(t, &calls, 0)
	other.ID = "other"
	hc := &headCounter{Backend: inmem.New()}
	s := store.New(hc, store.Options{})
	seedThreads(t, s, 30)
	ts := newServer(t, s, pause, other)
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("p%d", i)
		as := "drafts"
		if i%3 == 2 {
			as = "other"
		}
		ts.json("POST", "/threads", map[string]any{"thread_id": id, "metadata": map[string]any{"team": fmt.Sprintf("x%d", i%2), "tags": map[string]any{"k": i % 2}}}, 200)
		ts.json("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": as}, 200)
	}
	ids := func(ps []pending) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ThreadID)
		}
		return strings.Join(out, " ")
	}
	hc.heads.Store(0)
	if got := ids(ts.pending("&limit=4")); got != "p0 p1 p2 p3" {
		t.Fatalf("oldest first: %s", got)
	}
	if n := hc.heads.Load(); n != 4 {
		t.Fatalf("a page of 4 pauses read %d heads", n)
	}
	if got := ids(ts.pending("&limit=4&offset=4")); got != "p4 p5" {
		t.Fatalf("second page: %s", got)
	}
	if got := ids(ts.pending(`&metadata={"team":"x1"}`)); got != "p1 p3 p5" {
		t.Fatalf("team x1: %s", got)
	}
	if got := ids(ts.pending(`&metadata={"tags":{"k":0}}&limit=2`)); got != "p0 p2" {
		t.Fatalf("object metadata: %s", got)
	}
	if got := ids(ts.pending("&assistant_id=other")); got != "p2 p5" {
		t.Fatalf("assistant other: %s", got)
	}
	if got := ids(ts.pending(`&assistant_id=drafts&metadata={"team":"x0"}&offset=1`)); got != "p4" {
		t.Fatalf("assistant drafts, team x0, offset 1: %s", got)
	}
}

var _ runs.Assistant = (*runs.Graph)(nil)
