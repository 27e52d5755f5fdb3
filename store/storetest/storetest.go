package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Harness opens stores of one backend.
type Harness struct {
	// Open returns a new, empty store with the given engine options. The
	// suite closes it.
	Open func(t *testing.T, opts store.Options) store.Store
	// Reopen closes s and opens the same storage again; nil for backends
	// without persistence.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Corrupt damages the stored column ("patch", "snapshot", "meta") of a
	// checkpoint; nil skips the corruption tests.
	Corrupt func(t *testing.T, s store.Store, ref store.Ref, column string)
	// Edit sets one stored column to value (an Inc adds to it), as someone
	// editing the database by hand would: a checkpoint column (see
	// CheckpointColumns) of the row ref names, "snapshot" for its snapshot
	// data, or a thread column (ThreadColumns) of thread ref.Thread. nil
	// skips the tests of edited rows.
	Edit func(t *testing.T, s store.Store, ref store.Ref, column string, value any)
	// Bytes returns every byte the storage of s holds — a database file
	// and its journals, every row of every table of a schema — for the
	// tests that check deleted data is gone; nil skips those checks.
	Bytes func(t *testing.T, s store.Store) []byte
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendAndLoad", testAppendAndLoad},
		{"StaleHeadConflicts", testStaleHead},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"ForkTree", testForkTree},
		{"ForkInto", testForkInto},
		{"ForkRefused", testForkRefused},
		{"NamespaceList", testNamespaceList},
		{"EditedRows", testEditedRows},
		{"InvalidSnapshot", testInvalidSnapshot},
		{"HistoryPagination", testHistoryPagination},
		{"EveryCheckpointRebuilds", testEveryCheckpointRebuilds},
		{"LateSnapshots", testLateSnapshots},
		{"EmptyThread", testEmptyThread},
		{"Threads", testThreads},
		{"Listing", testListing},
		{"Namespaces", testNamespaces},
		{"PendingWrites", testPendingWrites},
		{"Prune", testPrune},
		{"PruneBranches", testPruneBranches},
		{"PruneWhileWriting", testPruneWhileWriting},
		{"PruneDeletesOldData", testPruneDeletesOldData},
		{"Expiry", testExpiry},
		{"CopyThread", testCopyThread},
		{"InvalidInput", testInvalidInput},
		{"Reopen", testReopen},
		{"Migrations", testMigrations},
		{"Corruption", testCorruption},
		{"Closed", testClosed},
		{"RunLog", testRunLog},
		{"RunLogRefs", testRunLogRefs},
		{"SetMetadata", testSetMetadata},
		{"Keys", testKeys},
		{"Leases", testLeases},
		{"Items", testItems},
		{"Storage", testStorage},
	}
	// Every case runs with the snapshot cache and without it: the cache
	// must never change an answer (except to hide damage from a process
	// that read the data before it was damaged).
	for _, v := range []struct {
		name string
		opts store.Options
	}{{"cache", store.Options{}}, {"nocache", store.Options{SnapshotCache: -1}}} {
		t.Run(v.name, func(t *testing.T) {
			vh := h
			vh.Open = func(t *testing.T, o store.Options) store.Store {
				if o.SnapshotCache == 0 {
					o.SnapshotCache = v.opts.SnapshotCache
				}
				return h.Open(t, o)
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, vh) })
			}
		})
	}
}

func open(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t, store.Options{})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var schema = state.MustSchema(
	state.WithField("messages", state.ReducerMessages),
	state.WithField("count", state.ReducerReplace),
	state.WithField("kv", state.ReducerMerge),
	state.WithField("total", state.ReducerAdd),
)

// model mirrors what a runner does: apply an update, append the checkpoint,
// and remember the expected state of every seq.
type model struct {
	t      *testing.T
	s      store.Store
	thread string
	ns     string
	head   int64
	doc    state.Doc
	want   map[int64]string
	ids    []string // message ids in doc
}

func newModel(t *testing.T, s store.Store, thread string) *model {
	return &model{t: t, s: s, thread: thread, want: map[int64]string{}}
}

func content(thread string, i int) string {
	c := fmt.Sprintf("t%s-step-%d-", thread, i)
	return c + strings.Repeat("x", max(0, 200-len(c)))
}

// step appends one W1-like step, with now and then a kv write, a message
// edit or a removal so patches are not all appends.
func (m *model) step(i int) store.Checkpoint {
	m.t.Helper()
	upd := state.Update{
		"messages": state.Message{ID: fmt.Sprintf("%s-m%d", m.thread, i), Role: "assistant", Content: content(m.thread, i)},
		"count":    i,
		"total":    1,
	}
	switch {
	case i%7 == 0:
		upd["kv"] = map[string]any{fmt.Sprintf("k%d", i%3): i, "gone": nil}
	case i%11 == 0 && len(m.ids) >= 2:
		last, first := m.ids[len(m.ids)-1], m.ids[0]
		m.ids = m.ids[:len(m.ids)-1]
		upd["messages"] = []state.Message{state.RemoveMessage(last), {ID: first, Content: "edited"}}
		return m.apply(upd, []string{"step"})
	}
	m.ids = append(m.ids, fmt.Sprintf("%s-m%d", m.thread, i))
	return m.apply(upd, []string{"step"})
}

func (m *model) apply(upd state.Update, nodes []string) store.Checkpoint {
	m.t.Helper()
	doc, patch, err := schema.Apply(m.doc, upd, state.ApplyOptions{NewID: func() string { return "id" }})
	if err != nil {
		m.t.Fatalf("apply: %v", err)
	}
	cp, err := m.s.Append(context.Background(), store.Checkpoint{
		Thread: m.thread, Namespace: m.ns, Parent: m.head, Nodes: nodes, Patch: patch, State: doc,
		Meta: store.Meta{Source: "step", Next: []string{"step"}},
	})
	if err != nil {
		m.t.Fatalf("append after %d: %v", m.head, err)
	}
	if cp.Seq != m.head+1 {
		m.t.Fatalf("append seq = %d, want %d", cp.Seq, m.head+1)
	}
	m.head, m.doc = cp.Seq, doc
	m.want[cp.Seq] = doc.String()
	return cp
}

func (m *model) checkLoad(seq int64) {
	m.t.Helper()
	cp, err := m.s.Load(context.Background(), store.LoadRequest{Thread: m.thread, Namespace: m.ns, Seq: seq})
	if err != nil {
		m.t.Fatalf("load %d: %v", seq, err)
	}
	want := m.want[seq]
	if seq == 0 {
		want = m.want[m.head]
	}
	if got := cp.State.String(); got != want {
		m.t.Fatalf("load %d: state\n got %.300s\nwant %.300s", seq, got, want)
	}
}

// checkAll loads every checkpoint the model appended.
func (m *model) checkAll() {
	m.t.Helper()
	for seq := range m.want {
		m.checkLoad(seq)
	}
}

// settle waits for the snapshots an engine writes after their commits.
func settle(s store.Store) {
	if e, ok := s.(*store.Engine); ok {
		e.WaitSnapshots()
	}
}

func testAppendAndLoad(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "t1")
	for i := 1; i <= 30; i++ {
		m.step(i)
	}
	m.checkLoad(0)
	for seq := int64(1); seq <= 30; seq++ {
		m.checkLoad(seq)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: 7})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 7 || cp.Parent != 6 || cp.Status != store.StatusSuccess || cp.Nodes[0] != "step" || cp.Meta.Source != "step" {
		t.Fatalf("checkpoint 7 = %+v", cp)
	}
	if len(cp.Patch) == 0 {
		t.Fatal("loaded checkpoint has no patch")
	}
	th, err := s.Thread(ctx, "t1")
	if err != nil || th.Head != 30 {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: 31}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load past head: %v", err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load unknown thread: %v", err)
	}
	if _, err := s.Thread(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
	// Statuses and metadata survive.
	score := 0.75
	doc, patch, _ := schema.Apply(m.doc, state.Update{"count": -1})
	failed, err := s.Append(ctx, store.Checkpoint{Thread: "t1", Parent: 30, Status: store.StatusFailed, Patch: patch, State: doc,
		Meta: store.Meta{Error: "boom", Score: &score, Tokens: &store.Tokens{Input: 3, Output: 4}, Interrupt: json.RawMessage(`{"ask":"why"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: failed.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusFailed || got.Meta.Error != "boom" || *got.Meta.Score != 0.75 || got.Meta.Tokens.Output != 4 || string(got.Meta.Interrupt) != `{"ask":"why"}` {
		t.Fatalf("failed checkpoint = %+v", got)
	}
}

func testStaleHead(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "stale")
	for i := 1; i <= 5; i++ {
		m.step(i)
	}
	for _, parent := range []int64{0, 3, 4, 9} {
		_, err := s.Append(ctx, store.Checkpoint{Thread: "stale", Parent: parent, State: m.doc})
		if parent == 9 {
			if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("parent %d: err = %v", parent, err)
			}
			continue
		}
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("parent %d: err = %v, want ErrConflict", parent, err)
		}
	}
	th, err := s.Thread(ctx, "stale")
	if err != nil || th.Head != 5 {
		t.Fatalf("head after conflicts = %d, %v", th.Head, err)
	}
	m.checkLoad(0)
}

func testConcurrentAppenders(t *testing.T, h Harness) {
	for _, writers := range []int{2, 8} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			ctx := context.Background()
			s := open(t, h)
			thread := fmt.Sprintf("race-%d", writers)
			m := newModel(t, s, thread)
			m.step(1)
			const rounds = 25
			for r := 0; r < rounds; r++ {
				head := m.head
				var wg sync.WaitGroup
				var mu sync.Mutex
				wins, conflicts := 0, 0
				var winner state.Doc
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						doc, patch, err := schema.Apply(m.doc, state.Update{"count": w})
						if err != nil {
							t.Error(err)
							return
						}
						_, err = s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Patch: patch, State: doc})
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							wins++
							winner = doc
						case errors.Is(err, store.ErrConflict):
							conflicts++
						default:
							t.Errorf("writer %d: %v", w, err)
						}
					}()
				}
				wg.Wait()
				if wins != 1 || conflicts != writers-1 {
					t.Fatalf("round %d: %d wins, %d conflicts", r, wins, conflicts)
				}
				m.head++
				m.doc = winner
				m.want[m.head] = winner.String()
			}
			th, err := s.Thread(ctx, thread)
			if err != nil || th.Head != rounds+1 {
				t.Fatalf("head = %d, %v", th.Head, err)
			}
			n := 0
			for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
				if err != nil {
					t.Fatal(err)
				}
				if cp.Parent != cp.Seq-1 {
					t.Fatalf("forked history: seq %d parent %d", cp.Seq, cp.Parent)
				}
				if cp.State.String() != m.want[cp.Seq] {
					t.Fatalf("seq %d state %s, want %s", cp.Seq, cp.State, m.want[cp.Seq])
				}
				n++
			}
			if n != rounds+1 {
				t.Fatalf("history has %d checkpoints", n)
			}
		})
	}
}

func testForkTree(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "tree")
	for i := 1; i <= 20; i++ {
		m.step(i)
	}
	forkBranch(t, s, m)
	// Continue the branch, then check every checkpoint of both branches.
	for i := 22; i <= 40; i++ {
		m.step(i)
	}
	for seq := int64(1); seq <= 40; seq++ {
		m.checkLoad(seq)
	}
	checkTree(t, s, m)
	// Appending to the old branch tip is a conflict: only the head grows.
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "tree", Parent: 20, State: m.doc}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append to old tip: %v", err)
	}
	// Fork into a new thread.
	nt, err := s.Fork(ctx, store.ForkRequest{Thread: "tree", At: 30, Into: "tree-copy"})
	if err != nil {
		t.Fatal(err)
	}
	if nt.Thread != "tree-copy" || nt.Seq != 1 {
		t.Fatalf("fork into = %+v", nt)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "tree-copy"})
	if err != nil || cp.State.String() != m.want[30] {
		t.Fatalf("forked thread state: %v", err)
	}
	checkRefusedForks(t, s)
}

// forkBranch forks thread "tree" at 8 with a changed count: the fork is
// checkpoint 21, the model's new head.
func forkBranch(t *testing.T, s store.Store, m *model) {
	t.Helper()
	change, err := state.ParsePatch([]byte(`[{"op":"replace","path":"/count","value":-5}]`))
	if err != nil {
		t.Fatal(err)
	}
	fk, err := s.Fork(context.Background(), store.ForkRequest{Thread: "tree", At: 8, Patch: change})
	if err != nil {
		t.Fatal(err)
	}
	if fk.Seq != 21 || fk.Parent != 8 || fk.Meta.Source != "fork" || fk.Meta.ForkedFrom.Seq != 8 {
		t.Fatalf("fork = %+v", fk)
	}
	want8, _ := state.ParseDoc([]byte(m.want[8]))
	want21, err := want8.Apply(change)
	if err != nil {
		t.Fatal(err)
	}
	m.want[21] = want21.String()
	m.head, m.doc = 21, want21
	m.ids = messageIDs(t, want21)
}

// checkTree checks that the old branch is untouched and history lists the
// whole tree.
func checkTree(t *testing.T, s store.Store, m *model) {
	t.Helper()
	parents := map[int64]int64{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "tree", WithState: true, PageSize: 6}) {
		if err != nil {
			t.Fatal(err)
		}
		parents[cp.Seq] = cp.Parent
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("history seq %d state differs", cp.Seq)
		}
	}
	if len(parents) != 40 || parents[21] != 8 || parents[22] != 21 || parents[9] != 8 {
		t.Fatalf("tree parents wrong: %v", parents)
	}
}

// checkRefusedForks: forks into an existing thread, from a missing seq or
// with a patch that does not apply are refused and move nothing.
func checkRefusedForks(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	bad, _ := state.ParsePatch([]byte(`[{"op":"remove","path":"/nope"}]`))
	for _, tc := range []struct {
		name string
		req  store.ForkRequest
		want error
	}{
		{"into an existing thread", store.ForkRequest{Thread: "tree", At: 30, Into: "tree-copy"}, store.ErrConflict},
		{"at a missing seq", store.ForkRequest{Thread: "tree", At: 99}, store.ErrNotFound},
		{"with a patch that does not apply", store.ForkRequest{Thread: "tree", At: 3, Patch: bad}, store.ErrInvalidArgument},
	} {
		if _, err := s.Fork(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Fatalf("fork %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if th, _ := s.Thread(ctx, "tree"); th.Head != 40 {
		t.Fatalf("failed forks moved the head to %d", th.Head)
	}
}

func testHistoryPagination(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "pages")
	for i := 1; i <= 53; i++ {
		m.step(i)
	}
	for _, tc := range []struct {
		req   store.HistoryRequest
		first int64
		n     int
	}{
		{store.HistoryRequest{Thread: "pages", PageSize: 7}, 53, 53},
		{store.HistoryRequest{Thread: "pages", PageSize: 7, WithState: true}, 53, 53},
		{store.HistoryRequest{Thread: "pages", Before: 20, PageSize: 5, WithState: true}, 19, 19},
		{store.HistoryRequest{Thread: "pages", Limit: 10, PageSize: 3}, 53, 10},
		{store.HistoryRequest{Thread: "pages", Before: 1}, 0, 0},
	} {
		var seqs []int64
		for cp, err := range s.History(ctx, tc.req) {
			if err != nil {
				t.Fatal(err)
			}
			if tc.req.WithState != cp.HasState {
				t.Fatalf("HasState = %v", cp.HasState)
			}
			if tc.req.WithState && cp.State.String() != m.want[cp.Seq] {
				t.Fatalf("seq %d: wrong state", cp.Seq)
			}
			seqs = append(seqs, cp.Seq)
		}
		if len(seqs) != tc.n || (tc.n > 0 && seqs[0] != tc.first) {
			t.Fatalf("%+v: got %d items starting %v", tc.req, len(seqs), seqs[:min(3, len(seqs))])
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]-1 {
				t.Fatalf("not newest first: %v", seqs)
			}
		}
	}
	// Stopping early is allowed.
	for range s.History(ctx, store.HistoryRequest{Thread: "pages"}) {
		break
	}
}

func testEveryCheckpointRebuilds(t *testing.T, h Harness) {
	s := open(t, h)
	m := newModel(t, s, "rebuild")
	for i := 1; i <= 400; i++ {
		m.step(i)
	}
	settle(s)
	snapshots := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "rebuild", WithState: true, PageSize: 64}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("seq %d: wrong state", cp.Seq)
		}
		if cp.Snapshot {
			snapshots++
		}
	}
	// Snapshots grow with the state: more than one, far fewer than rows.
	if snapshots < 2 || snapshots > 60 {
		t.Fatalf("%d snapshots in 400 checkpoints", snapshots)
	}
	for _, seq := range []int64{1, 2, 199, 200, 201, 399, 400} {
		m.checkLoad(seq)
	}
}

func testThreads(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	for i := 0; i < 25; i++ {
		tenant := "a"
		if i%2 == 1 {
			tenant = "b"
		}
		_, err := s.CreateThread(ctx, store.Thread{ID: fmt.Sprintf("th-%02d", i), Tenant: tenant, Metadata: map[string]any{"user": fmt.Sprintf("u%d", i%3), "n": i, "x'); DROP TABLE threads;--": 1}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "th-00"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate create: %v", err)
	}
	checkThreadFilters(t, s)
	th, err := s.Thread(ctx, "th-03")
	if err != nil || th.Tenant != "b" || th.Metadata["user"] != "u0" || th.Head != 0 {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	m := newModel(t, s, "th-03")
	m.step(1)
	if err := s.DeleteThread(ctx, "th-03"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Thread(ctx, "th-03"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted thread: %v", err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "th-03"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted thread load: %v", err)
	}
	if err := s.DeleteThread(ctx, "th-03"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	// A deleted thread starts again from seq 1.
	m2 := newModel(t, s, "th-03")
	m2.step(1)
	m2.checkLoad(0)
}

// checkThreadFilters lists the 25 threads testThreads made through
// filters, pages and limits, hostile keys and values included.
func checkThreadFilters(t *testing.T, s store.Store) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		filter store.ThreadFilter
		want   int
		first  string // "" when any
	}{
		{"all, in pages", store.ThreadFilter{PageSize: 4}, 25, "th-00"},
		{"tenant b", store.ThreadFilter{Tenant: "b"}, 12, ""},
		{"user u1, in pages", store.ThreadFilter{Metadata: map[string]any{"user": "u1"}, PageSize: 2}, 8, ""},
		{"user u1 and n 4", store.ThreadFilter{Metadata: map[string]any{"user": "u1", "n": 4}}, 1, "th-04"},
		{"a hostile key", store.ThreadFilter{Metadata: map[string]any{"x'); DROP TABLE threads;--": 1}}, 25, ""},
		{"a hostile value", store.ThreadFilter{Metadata: map[string]any{"user": "' OR 1=1 --"}}, 0, ""},
		{"limit", store.ThreadFilter{Limit: 3}, 3, ""},
	} {
		var ids []string
		for th, err := range s.Threads(context.Background(), tc.filter) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, th.ID)
		}
		if len(ids) != tc.want || (tc.first != "" && ids[0] != tc.first) {
			t.Fatalf("threads, %s: %v", tc.name, ids)
		}
	}
	for _, err := range s.Threads(context.Background(), store.ThreadFilter{Metadata: map[string]any{"user": []int{1}}}) {
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("non-scalar filter: %v", err)
		}
	}
}

func testNamespaces(t *testing.T, h Harness) {
	s := open(t, h)
	root := newModel(t, s, "ns")
	sub := newModel(t, s, "ns")
	sub.ns = "policy:1"
	for i := 1; i <= 10; i++ {
		root.step(i)
		if i%2 == 0 {
			sub.step(100 + i)
		}
	}
	root.checkLoad(0)
	sub.checkLoad(0)
	sub.checkLoad(3)
	th, err := s.Thread(context.Background(), "ns")
	if err != nil || th.Head != 10 {
		t.Fatalf("root head %d, %v", th.Head, err)
	}
	if sub.head != 5 {
		t.Fatalf("sub head %d", sub.head)
	}
}

func testPendingWrites(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "pw")
	m.step(1)
	ws := []store.Write{{Task: "b:1", Node: "b", Update: json.RawMessage(`{"count":2}`)}, {Task: "a:0", Node: "a", Update: json.RawMessage(`{"kv":{"x":1}}`)}}
	if err := s.PutWrites(ctx, "pw", "", 1, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "b:1", Node: "b", Update: json.RawMessage(`{"count":3}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Writes(ctx, "pw", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Task != "a:0" || string(got[1].Update) != `{"count":3}` {
		t.Fatalf("writes = %+v", got)
	}
	if got, _ := s.Writes(ctx, "pw", "", 2); len(got) != 0 {
		t.Fatalf("writes of another step: %+v", got)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "", Update: json.RawMessage(`{}`)}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad write: %v", err)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "x", Update: json.RawMessage(`{`)}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad write JSON: %v", err)
	}
}

func testPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "prune")
	for i := 1; i <= 300; i++ {
		m.step(i)
	}
	other := newModel(t, s, "prune-other")
	for i := 1; i <= 5; i++ {
		other.step(i)
	}
	res, err := s.Prune(ctx, store.PruneRequest{Thread: "prune", KeepLast: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoints == 0 || res.Threads != 1 {
		t.Fatalf("prune = %+v", res)
	}
	var oldest int64
	n := 0
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "prune", WithState: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("seq %d wrong after prune", cp.Seq)
		}
		oldest = cp.Seq
		n++
	}
	if n != 10 || int64(n) != 300-res.Checkpoints || oldest != res.Checkpoints+1 {
		t.Fatalf("after prune: %d left, oldest %d, deleted %d", n, oldest, res.Checkpoints)
	}
	m.step(301)
	m.checkLoad(0)
	other.checkLoad(1)
	if _, err := s.Prune(ctx, store.PruneRequest{Thread: "missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("prune missing: %v", err)
	}
	if _, err := s.Prune(ctx, store.PruneRequest{KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	other.checkLoad(0)
}

func testInvalidInput(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	for _, id := range []string{"", "-x", "a b", "a/", "/b", "a/b/c", "a/-x", "é", strings.Repeat("a", 129), "x;drop"} {
		if _, err := s.Append(ctx, store.Checkpoint{Thread: id}); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("thread id %q: %v", id, err)
		}
		if _, err := s.Load(ctx, store.LoadRequest{Thread: id}); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("load %q: %v", id, err)
		}
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Namespace: "/bad"}); !errors.Is(err, store.ErrInvalidID) {
		t.Errorf("namespace: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Status: 99}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("status: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Parent: -1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("parent: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Meta: store.Meta{Extra: map[string]any{"c": make(chan int)}}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("meta: %v", err)
	}
	if _, err := s.Thread(ctx, "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed appends created a thread: %v", err)
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("backend has no persistence")
	}
	s := h.Open(t, store.Options{})
	m := newModel(t, s, "durable")
	for i := 1; i <= 120; i++ {
		m.step(i)
	}
	s = h.Reopen(t, s)
	t.Cleanup(func() { _ = s.Close() })
	m.s = s
	m.checkLoad(0)
	m.checkLoad(77)
	// A new store instance continues the thread, and conflicts still hold.
	m.step(121)
	m.checkLoad(0)
	if _, err := s.Append(context.Background(), store.Checkpoint{Thread: "durable", Parent: 120, State: m.doc}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale append after reopen: %v", err)
	}
}

func testMigrations(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	// A v1 state stored earlier...
	v1, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"schema_version": 1, "name": "ada", "max_steps": 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "mig", Patch: patch, State: v1}); err != nil {
		t.Fatal(err)
	}
	// ...is read by code at v2, which migrates it.
	type v2 struct {
		state.Base
		FullName string `json:"full_name"`
	}
	migr := state.NewMigrations(2)
	if err := migr.Register(1, func(d state.Doc) (state.Doc, error) {
		var name string
		if err := d.Get("name", &name); err != nil {
			return state.Doc{}, err
		}
		return state.MustSchema().ApplyNoPatch(d, state.Update{"full_name": name})
	}); err != nil {
		t.Fatal(err)
	}
	typed, err := state.NewTyped[v2](state.WithMigrations(migr))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "mig"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := typed.Decode(cp.State)
	if err != nil || got.FullName != "ada" || got.SchemaVersion != 2 {
		t.Fatalf("migrated = %+v, %v", got, err)
	}
	// A state from the future is refused, naming the version.
	v9, patch9, _ := state.MustSchema().Apply(cp.State, state.Update{"schema_version": 9})
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "mig", Parent: cp.Seq, Patch: patch9, State: v9}); err != nil {
		t.Fatal(err)
	}
	cp, err = s.Load(ctx, store.LoadRequest{Thread: "mig"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := typed.Decode(cp.State); !errors.Is(err, state.ErrUnknownVersion) {
		t.Fatalf("future version: %v", err)
	}
}

func testCorruption(t *testing.T, h Harness) {
	if h.Corrupt == nil {
		t.Skip("backend cannot be corrupted from the outside")
	}
	ctx := context.Background()
	// Without the cache: this process must see the damage on disk.
	s := h.Open(t, store.Options{SnapshotCache: -1})
	t.Cleanup(func() { _ = s.Close() })
	bad := newModel(t, s, "bad")
	good := newModel(t, s, "good")
	const n = 150
	for i := 1; i <= n; i++ {
		bad.step(i)
		good.step(i)
	}
	// Damage the first snapshot after seq 2, and the patch of the head,
	// which must replay from a later snapshot (written after its commit:
	// wait for it).
	settle(s)
	var snaps []int64
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "bad"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Snapshot && cp.Seq > 2 {
			snaps = append([]int64{cp.Seq}, snaps...)
		}
	}
	if len(snaps) < 2 {
		t.Fatalf("snapshots after seq 2: %v; want two", snaps)
	}
	snapSeq := snaps[0]
	h.Corrupt(t, s, store.Ref{Thread: "bad", Seq: n}, "patch")
	h.Corrupt(t, s, store.Ref{Thread: "bad", Seq: snapSeq}, "snapshot")
	h.Corrupt(t, s, store.Ref{Thread: "bad", Seq: 2}, "meta")
	for _, tc := range []struct {
		load, at int64
		what     string
	}{{n, n, "patch"}, {0, n, "patch"}, {snapSeq, snapSeq, "snapshot"}, {2, 2, "metadata"}} {
		_, err := s.Load(ctx, store.LoadRequest{Thread: "bad", Seq: tc.load})
		var ce *store.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("load seq %d: err = %v, want CorruptError", tc.load, err)
		}
		if ce.Thread != "bad" || ce.Seq != tc.at || !strings.Contains(ce.What, tc.what) || !strings.Contains(err.Error(), `"bad"`) {
			t.Fatalf("load seq %d: %v names the wrong place (want seq %d, %s)", tc.load, err, tc.at, tc.what)
		}
	}
	// Checkpoints that do not depend on the damage still load.
	bad.checkLoad(1)
	// The history walk reports the damage as an error and stops.
	sawErr := false
	for _, err := range s.History(ctx, store.HistoryRequest{Thread: "bad", WithState: true}) {
		if err != nil {
			sawErr = errors.Is(err, store.ErrCorrupt)
			break
		}
	}
	if !sawErr {
		t.Fatal("history over a corrupt row gave no ErrCorrupt")
	}
	// Other threads are untouched.
	for seq := int64(1); seq <= n; seq++ {
		good.checkLoad(seq)
	}
}

func testClosed(t *testing.T, h Harness) {
	s := h.Open(t, store.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Append(context.Background(), store.Checkpoint{Thread: "x"}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := s.Load(context.Background(), store.LoadRequest{Thread: "x"}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("load after close: %v", err)
	}
}

func messageIDs(t *testing.T, d state.Doc) []string {
	var msgs []state.Message
	if err := d.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}
