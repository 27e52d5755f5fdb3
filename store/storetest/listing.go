package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// listFixture is a store of threads of several tenants, metadata shapes
// and statuses on a settable clock, and the ids of the threads it holds.
type listFixture struct {
	s     store.Store
	c     *clock
	heads map[string]int64 // thread → root head seq
	subs  map[string]int64 // thread → head seq of namespace "sub"
}

// longValue is a metadata value longer than the index holds as it is.
var longValue = strings.Repeat("v", 300)

func listMetadata(i int) map[string]any {
	if i == 10 {
		return nil
	}
	md := map[string]any{"user": fmt.Sprintf("u%d", i%4), "n": i % 3}
	if i%5 == 0 {
		md["flag"] = true
	}
	if i%6 == 0 {
		md["obj"] = map[string]any{"x": i}
	}
	if i%7 == 0 {
		md["opt"] = nil
	}
	if i%8 == 0 {
		md["long"] = longValue
	}
	return md
}

func listTenant(i int) string {
	switch {
	case i >= 35:
		return ""
	case i%2 == 0:
		return "a"
	}
	return "b"
}

// SeedListing writes the threads the listing tests list (see
// newListFixture) in s, on the real clock; CheckListings checks them.
func SeedListing(t testing.TB, s store.Store) {
	t.Helper()
	newListFixture(t, s, nil)
}

// CheckListings lists and counts the threads SeedListing wrote (and
// whatever became of them) through every filter, order and page of the
// listing tests — with thorough false, every filter's count and first
// page only — and compares each answer with a scan of every thread and
// head.
func CheckListings(t testing.TB, s store.Store, when string, thorough bool) {
	t.Helper()
	f := &listFixture{s: s}
	if thorough {
		f.check(t, when)
		return
	}
	all := f.scan(t)
	for _, filter := range listFilters() {
		f.checkCount(t, when, all, filter)
		filter.Limit = 10
		f.checkPage(t, when, all, filter)
	}
}

// newListFixture writes 40 threads: tenants a, b and "", metadata with
// scalars, objects, nulls and long values, empty threads, and heads that
// finished, paused (an INTERRUPTED checkpoint, or a run stopped at an
// interrupt) or failed; some with a failed subgraph row, which does not
// change the thread's status. The clock (nil: the real one) moves on
// between writes.
func newListFixture(t testing.TB, s store.Store, c *clock) *listFixture {
	t.Helper()
	f := &listFixture{s: s, c: c, heads: map[string]int64{}, subs: map[string]int64{}}
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		f.tick(10 * time.Millisecond)
		id := fmt.Sprintf("t%02d", i)
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: listTenant(i), Metadata: listMetadata(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 40; i++ {
		if i%3 == 0 {
			continue
		}
		id := fmt.Sprintf("t%02d", i)
		for k := 0; k <= i%4; k++ {
			f.tick(time.Duration(3+i%5) * 100 * time.Millisecond)
			f.commit(t, id, store.StatusSuccess, store.Meta{})
		}
		switch i % 5 {
		case 1:
			f.commit(t, id, store.StatusInterrupted, store.Meta{StopReason: "interrupt"})
		case 2:
			f.commit(t, id, store.StatusSuccess, store.Meta{StopReason: "interrupt"})
		case 3:
			f.commit(t, id, store.StatusFailed, store.Meta{Error: "boom"})
		}
		if i%4 == 1 {
			f.commitSub(t, id, store.StatusFailed)
		}
	}
	// Threads committed to at once after their creation, within the touch
	// slack: their first commits write nothing of the index.
	for _, id := range []string{"t40", "t41"} {
		f.tick(store.TouchSlack / 10)
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: "a", Metadata: map[string]any{"user": "u0"}}); err != nil {
			t.Fatal(err)
		}
		f.tick(store.TouchSlack / 10)
		f.commit(t, id, store.StatusSuccess, store.Meta{})
	}
	f.tick(store.TouchSlack / 10)
	f.commit(t, "t40", store.StatusSuccess, store.Meta{})
	return f
}

// tick moves the fixture's clock on (the real clock moves by itself).
func (f *listFixture) tick(d time.Duration) {
	if f.c != nil {
		f.c.add(d)
	}
}

// commit appends a root checkpoint to a thread at the clock's time.
func (f *listFixture) commit(t testing.TB, id string, st store.Status, meta store.Meta) {
	t.Helper()
	cp, err := f.s.Append(context.Background(), store.Checkpoint{Thread: id, Parent: f.heads[id], State: state.Doc{}, Status: st, Meta: meta})
	if err != nil {
		t.Fatalf("append to %s: %v", id, err)
	}
	f.heads[id] = cp.Seq
}

// commitSub appends a checkpoint to a thread's namespace "sub".
func (f *listFixture) commitSub(t testing.TB, id string, st store.Status) {
	t.Helper()
	cp, err := f.s.Append(context.Background(), store.Checkpoint{Thread: id, Namespace: "sub", Parent: f.subs[id], State: state.Doc{}, Status: st})
	if err != nil {
		t.Fatalf("append to %s/sub: %v", id, err)
	}
	f.subs[id] = cp.Seq
}

// listed is a thread as a scan of every thread sees it.
type listed struct {
	th       store.Thread
	status   store.ThreadStatus
	statusAt int64
}

// scan reads every thread the fixture made, with its head's status: what
// a listing must answer, computed the slow way.
func (f *listFixture) scan(t testing.TB) []listed {
	t.Helper()
	ctx := context.Background()
	var out []listed
	for th, err := range f.s.Threads(ctx, store.ThreadFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		l := listed{th: th, status: store.ThreadIdle}
		if th.Head > 0 {
			cp, err := f.s.Load(ctx, store.LoadRequest{Thread: th.ID})
			if err != nil {
				t.Fatal(err)
			}
			if l.status = store.ThreadStatusOf(cp); l.status != store.ThreadIdle {
				l.statusAt = cp.CreatedAt.UnixNano()
			}
		}
		out = append(out, l)
	}
	return out
}

// metaMatches is a metadata filter checked on a thread's metadata.
func metaMatches(md, filter map[string]any) bool {
	for k, want := range filter {
		got, ok := md[k]
		if want == nil {
			if ok && got != nil {
				return false
			}
			continue
		}
		switch got.(type) {
		case map[string]any, []any, nil:
			return false
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			return false
		}
	}
	return true
}

func (l listed) matches(s store.ThreadSearch) bool {
	switch {
	case !s.AllTenants && l.th.Tenant != s.Tenant,
		s.IDs != nil && !slices.Contains(s.IDs, l.th.ID),
		slices.Contains(s.Exclude, l.th.ID),
		len(s.Status) > 0 && !slices.Contains(s.Status, l.status):
		return false
	}
	return metaMatches(l.th.Metadata, s.Metadata)
}

func (l listed) key(by store.ThreadSort) int64 {
	switch by {
	case store.SortUpdated:
		return l.th.UpdatedAt.UnixNano()
	case store.SortStatus:
		return int64(l.status)
	case store.SortStatusAt:
		return l.statusAt
	case store.SortID:
		return 0
	}
	return l.th.CreatedAt.UnixNano()
}

// want is the page a search must list, from a scan.
func want(all []listed, s store.ThreadSearch) (ids []string, total int) {
	var sel []listed
	for _, l := range all {
		if l.matches(s) {
			sel = append(sel, l)
		}
	}
	slices.SortFunc(sel, func(a, b listed) int {
		c := cmp.Compare(a.key(s.Sort), b.key(s.Sort))
		if c == 0 {
			c = strings.Compare(a.th.ID, b.th.ID)
		}
		if s.Desc {
			return -c
		}
		return c
	})
	total = len(sel)
	sel = sel[min(s.Offset, len(sel)):]
	if s.Limit > 0 {
		sel = sel[:min(s.Limit, len(sel))]
	}
	for _, l := range sel {
		ids = append(ids, l.th.ID)
	}
	return ids, total
}

// listFilters are the filters every check lists through.
func listFilters() []store.ThreadSearch {
	return []store.ThreadSearch{
		{Tenant: "a"},
		{Tenant: "b"},
		{},
		{AllTenants: true},
		{Tenant: "a", Metadata: map[string]any{"user": "u2"}},
		{Tenant: "b", Metadata: map[string]any{"user": "u1", "n": 1}},
		{Tenant: "a", Metadata: map[string]any{"n": 0.0, "flag": true}},
		{Tenant: "a", Metadata: map[string]any{"opt": nil}},
		{Tenant: "a", Metadata: map[string]any{"obj": nil, "user": "u0"}},
		{Tenant: "a", Metadata: map[string]any{"long": longValue}},
		{Tenant: "b", Metadata: map[string]any{"user": "' OR 1=1 --"}},
		{Tenant: "b", Metadata: map[string]any{"x'); DROP TABLE threads;--": nil}},
		{Tenant: "a", Status: []store.ThreadStatus{store.ThreadInterrupted}},
		{Tenant: "b", Status: []store.ThreadStatus{store.ThreadIdle, store.ThreadError}},
		{Tenant: "b", Status: []store.ThreadStatus{store.ThreadError}, Metadata: map[string]any{"user": "u3"}},
		{Tenant: "a", IDs: []string{"t02", "t04", "t05", "t07", "t20", "t99"}},
		{Tenant: "a", IDs: []string{"t02", "t04", "t08", "t12"}, Metadata: map[string]any{"n": 2}},
		{Tenant: "a", IDs: []string{}},
		{Tenant: "a", Exclude: []string{"t02", "t04", "t06"}},
		{Tenant: "a", Exclude: []string{"t02", "t03"}, Metadata: map[string]any{"user": "u2"}},
		{Tenant: "b", Exclude: []string{"t01"}, Status: []store.ThreadStatus{store.ThreadInterrupted}},
		{AllTenants: true, Metadata: map[string]any{"user": "u1"}},
		{AllTenants: true, Status: []store.ThreadStatus{store.ThreadInterrupted}},
	}
}

// check lists and counts through every filter, order and page, and
// compares each answer with a scan.
func (f *listFixture) check(t testing.TB, when string) {
	t.Helper()
	all := f.scan(t)
	// The whole listing and a page from its middle; the first page and a
	// page past the end are checked once (checkListingPages).
	pages := [][2]int{{0, 0}, {3, 4}}
	for _, filter := range listFilters() {
		f.checkCount(t, when, all, filter)
		for _, by := range []store.ThreadSort{store.SortCreated, store.SortUpdated, store.SortID, store.SortStatus} {
			for _, desc := range []bool{false, true} {
				for _, p := range pages {
					s := filter
					s.Sort, s.Desc, s.Offset, s.Limit = by, desc, p[0], p[1]
					f.checkPage(t, when, all, s)
				}
			}
		}
	}
	for _, st := range []store.ThreadStatus{store.ThreadInterrupted, store.ThreadError} {
		for _, tenant := range []string{"a", "b"} {
			for _, desc := range []bool{false, true} {
				s := store.ThreadSearch{Tenant: tenant, Status: []store.ThreadStatus{st}, Sort: store.SortStatusAt, Desc: desc, Limit: 3}
				f.checkPage(t, when, all, s)
				s.Limit = 0
				f.checkPage(t, when, all, s)
			}
		}
	}
}

// checkListingPages checks the pages f.check leaves out — the first
// page, and a page past the end — for every filter and order.
func checkListingPages(t *testing.T, f *listFixture) {
	all := f.scan(t)
	for _, filter := range listFilters() {
		for _, by := range []store.ThreadSort{store.SortCreated, store.SortUpdated, store.SortID, store.SortStatus} {
			for _, desc := range []bool{false, true} {
				for _, p := range [][2]int{{0, 5}, {30, 10}} {
					s := filter
					s.Sort, s.Desc, s.Offset, s.Limit = by, desc, p[0], p[1]
					f.checkPage(t, "pages", all, s)
				}
			}
		}
	}
}

func (f *listFixture) checkCount(t testing.TB, when string, all []listed, s store.ThreadSearch) {
	t.Helper()
	_, total := want(all, s)
	n, err := f.s.CountThreads(context.Background(), s)
	if err != nil || n != int64(total) {
		t.Fatalf("%s: count %+v = %d, %v; want %d", when, s, n, err, total)
	}
}

func (f *listFixture) checkPage(t testing.TB, when string, all []listed, s store.ThreadSearch) {
	t.Helper()
	ids, _ := want(all, s)
	got, err := f.s.ListThreads(context.Background(), s)
	if err != nil {
		t.Fatalf("%s: list %+v: %v", when, s, err)
	}
	var gotIDs []string
	for _, th := range got {
		gotIDs = append(gotIDs, th.ID)
		if i := slices.IndexFunc(all, func(l listed) bool { return l.th.ID == th.ID }); i < 0 || all[i].status != th.Status || all[i].th.Head != th.Head || !all[i].th.UpdatedAt.Equal(th.UpdatedAt) {
			t.Fatalf("%s: list %+v: thread %+v differs from what Thread and Load read", when, s, th)
		}
	}
	if fmt.Sprint(gotIDs) != fmt.Sprint(ids) {
		t.Fatalf("%s: list %+v:\n got %v\nwant %v", when, s, gotIDs, ids)
	}
}

// testListing: ListThreads and CountThreads answer every search (tenant,
// metadata scalars, nulls, long values, ids, exclusions, statuses, each
// order both ways, pages) as a scan of every thread and head would, and
// keep answering so after every write that changes what they read:
// commits that change a status or come within the touch slack, new
// metadata, deletes, copies, forks into new threads and inside a thread,
// an emptied thread, pruned history, expiry, and a reopened store.
func testListing(t *testing.T, h Harness) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	s := h.Open(t, store.Options{Now: c.Now})
	t.Cleanup(func() { _ = s.Close() })
	f := newListFixture(t, s, c)
	f.check(t, "written")
	checkListingPages(t, f)
	ctx := context.Background()

	// Head times within the touch slack: t04 committed last, though its
	// touch is older than t08's.
	c.add(5 * time.Second)
	f.commit(t, "t04", store.StatusSuccess, store.Meta{})
	c.add(store.TouchSlack / 5)
	f.commit(t, "t08", store.StatusSuccess, store.Meta{})
	c.add(store.TouchSlack / 2)
	f.commit(t, "t04", store.StatusSuccess, store.Meta{})
	got, err := s.ListThreads(ctx, store.ThreadSearch{Tenant: "a", Sort: store.SortUpdated, Desc: true, Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != "t04" {
		t.Fatalf("newest head: %+v, %v", got, err)
	}
	// Statuses move: a pause answered, a pause paused again, a failure
	// retried into a pause.
	c.add(time.Second)
	f.commit(t, "t01", store.StatusSuccess, store.Meta{}) // was interrupted
	f.commit(t, "t02", store.StatusInterrupted, store.Meta{})
	f.commit(t, "t13", store.StatusInterrupted, store.Meta{}) // was failed
	f.check(t, "after commits")

	checkListingUpkeep(t, f)
	if h.Reopen != nil {
		f.s = h.Reopen(t, s)
		t.Cleanup(func() { _ = f.s.Close() })
		c.add(time.Second)
		f.commit(t, "t05", store.StatusFailed, store.Meta{})
		f.commit(t, "t08", store.StatusSuccess, store.Meta{})
		f.check(t, "after a reopen")
	}
	checkListingInvalid(t, f.s)
}

// checkListingUpkeep changes threads every way that changes what a
// listing reads (and prunes history, which must change nothing of it),
// checking every listing after each.
func checkListingUpkeep(t *testing.T, f *listFixture) {
	ctx := context.Background()
	s := f.s
	if _, err := s.SetMetadata(ctx, "t04", map[string]any{"user": "u1", "n": 2, "opt": "now set", "long": longValue}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetMetadata(ctx, "t06", nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, "after new metadata")
	for _, id := range []string{"t07", "t12", "t20"} {
		if err := s.DeleteThread(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	f.check(t, "after deletes")
	f.c.add(time.Second)
	for _, cp := range [][2]string{{"t01", "c01"}, {"t02", "c02"}, {"t14", "c14"}, {"t09", "c09"}} {
		if _, err := s.CopyThread(ctx, cp[0], cp[1]); err != nil {
			t.Fatal(err)
		}
	}
	f.check(t, "after copies")
	f.c.add(time.Second)
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "t05", At: 1, Into: "f05", Metadata: map[string]any{"user": "u3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "t11", At: 1}); err != nil { // was interrupted
		t.Fatal(err)
	}
	f.check(t, "after forks")
	if e, ok := s.(interface {
		EmptyThread(context.Context, string) error
	}); ok {
		if err := e.EmptyThread(ctx, "t16"); err != nil { // was interrupted
			t.Fatal(err)
		}
		f.check(t, "after emptying a thread")
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "p00", Tenant: "b", Metadata: map[string]any{"user": "u1"}}); err != nil {
		t.Fatal(err)
	}
	m := newModel(t, s, "p00")
	for i := 1; i <= 60; i++ {
		m.step(i)
	}
	if res, err := s.Prune(ctx, store.PruneRequest{KeepLast: 1}); err != nil || res.Checkpoints == 0 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	f.check(t, "after pruning history")
	if _, err := s.SetMetadata(ctx, "t24", map[string]any{store.ThreadTTLKey: "1h", "user": "u2"}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(ctx, store.PruneRequest{Expired: true, Now: f.c.Now().Add(2 * time.Hour)})
	if err != nil || !slices.Contains(res.Deleted, "t24") {
		t.Fatalf("expiry: %+v, %v", res, err)
	}
	f.check(t, "after expiry")
}

// checkListingInvalid: bad searches are ErrInvalidArgument, naming what.
func checkListingInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, bad := range []store.ThreadSearch{
		{Metadata: map[string]any{"user": []any{"u1"}}},
		{Metadata: map[string]any{"user": map[string]any{"a": 1}}},
		{Offset: -1},
		{Limit: -2},
		{Status: []store.ThreadStatus{9}},
		{Sort: store.SortStatusAt},
		{Sort: store.SortStatusAt, Status: []store.ThreadStatus{store.ThreadIdle}},
		{Sort: 42},
	} {
		if _, err := s.ListThreads(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("list %+v: %v, want ErrInvalidArgument", bad, err)
		}
		if bad.Sort == store.SortCreated && bad.Offset >= 0 && bad.Limit >= 0 { // a count has no order or page
			if _, err := s.CountThreads(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("count %+v: %v, want ErrInvalidArgument", bad, err)
			}
		}
	}
}
