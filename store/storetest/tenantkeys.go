package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// TenantKeys is a store's content as a Cairn before format 7 kept it for
// a tenant (WriteTenantThreads): thread "x" of tenant acme under its bare
// id, with checkpoints in the root namespace and a subgraph, a pending
// write, a run with its events and a lease; and thread "y" without a
// tenant, with a run. Check reads it back after format 7 keyed x as
// "acme/x" (TenantKey).
type TenantKeys struct {
	root, sub map[int64]string
	status    store.ThreadStatus
	storage   store.ThreadStorage
	lease     store.Lease
	events    []store.EventRecord
	y         string
}

// The fixture's threads: x of tenant acme, which format 7 keys, and y
// without a tenant, which it leaves.
const (
	TenantThread = "x"
	Tenant       = "acme"
	TenantKey    = Tenant + "/" + TenantThread
	plainThread  = "y"
	pendingSeq   = 6
)

var pendingWrite = json.RawMessage(`{"count":99}`)

// WriteTenantThreads writes the fixture TenantKeys describes through the
// store's API, which keeps a thread given a tenant and a bare id under
// that id as every Cairn before format 7 did, and returns what it wrote.
func WriteTenantThreads(t *testing.T, s store.Store) *TenantKeys {
	t.Helper()
	ctx := context.Background()
	f := &TenantKeys{}
	if _, err := s.CreateThread(ctx, store.Thread{ID: TenantThread, Tenant: Tenant, Metadata: map[string]any{"file": "x.md", "kind": "chat"}}); err != nil {
		t.Fatal(err)
	}
	f.root, f.sub = writeModels(t, s, TenantThread)
	if err := s.PutWrites(ctx, TenantThread, "", pendingSeq, []store.Write{{Task: "n:0", Node: "n", Update: pendingWrite}}); err != nil {
		t.Fatal(err)
	}
	f.events = writeRun(t, s, "rx", TenantThread, Tenant)
	f.lease = takeLease(t, s, TenantThread)
	y := newModel(t, s, plainThread)
	y.step(1)
	f.y = y.want[1]
	writeRun(t, s, "ry", plainThread, "")
	settle(s)
	th, err := s.Thread(ctx, TenantThread)
	if err != nil {
		t.Fatal(err)
	}
	f.status = th.Status
	if f.storage, err = store.ThreadStorageOf(ctx, s, TenantThread); err != nil {
		t.Fatal(err)
	}
	return f
}

// writeModels appends 20 checkpoints to thread's root namespace and 5 to
// a subgraph's, and returns the states of each by seq.
func writeModels(t *testing.T, s store.Store, thread string) (root, sub map[int64]string) {
	m := newModel(t, s, thread)
	for i := 1; i <= 20; i++ {
		m.step(i)
	}
	n := newModel(t, s, thread)
	n.ns = "sub:1"
	for i := 1; i <= 5; i++ {
		n.step(i)
	}
	return m.want, n.want
}

// writeRun records a run of thread with two events and returns them.
func writeRun(t *testing.T, s store.Store, id, thread, tenant string) []store.EventRecord {
	t.Helper()
	ctx := context.Background()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.PutRun(ctx, store.RunRecord{ID: id, Thread: thread, Tenant: tenant, Status: "success", CreatedAt: 1, UpdatedAt: 2, Data: []byte(`{"input":"secret"}`)}); err != nil {
		t.Fatal(err)
	}
	evs := []store.EventRecord{{Seq: 1, Data: []byte(`{"e":1}`)}, {Seq: 2, Data: []byte(`{"e":2}`)}}
	if err := rl.AppendEvents(ctx, id, evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func takeLease(t *testing.T, s store.Store, thread string) store.Lease {
	t.Helper()
	ls, err := store.LeasesOf(s)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ls.Acquire(context.Background(), thread, "worker-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Check reads the fixture from s after format 7 keyed x: under
// "acme/x", x has its record, states, history, pending write, run, events,
// lease, listings, counts and storage report, every checksum verifying;
// "x" names nothing; y is as it was.
func (f *TenantKeys) Check(t *testing.T, s store.Store) {
	t.Helper()
	f.checkThread(t, s)
	checkHistory(t, s, "", f.root)
	checkHistory(t, s, "sub:1", f.sub)
	f.checkRuns(t, s)
	f.checkListing(t, s)
	f.checkStorage(t, s)
	f.checkGone(t, s)
	f.checkUntouched(t, s)
}

func (f *TenantKeys) checkThread(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	th, err := s.Thread(ctx, TenantKey)
	if err != nil || th.ID != TenantKey || th.Tenant != Tenant || th.Head != 20 || th.Metadata["file"] != "x.md" || th.Status != f.status {
		t.Fatalf("thread %s: %+v, %v", TenantKey, th, err)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: TenantKey})
	if err != nil || cp.Seq != 20 || cp.State.String() != f.root[20] {
		t.Fatalf("head of %s: %v", TenantKey, err)
	}
	ws, err := s.Writes(ctx, TenantKey, "", pendingSeq)
	if err != nil || len(ws) != 1 || string(ws[0].Update) != string(pendingWrite) {
		t.Fatalf("pending writes of %s: %+v, %v", TenantKey, ws, err)
	}
	ls, err := store.LeasesOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := ls.Lease(ctx, TenantKey); err != nil || l.Token != f.lease.Token || l.Owner != f.lease.Owner {
		t.Fatalf("lease of %s: %+v, %v (was %+v)", TenantKey, l, err, f.lease)
	}
}

// checkHistory reads every checkpoint of a namespace of the keyed thread,
// newest first, with its state.
func checkHistory(t *testing.T, s store.Store, ns string, want map[int64]string) {
	t.Helper()
	n := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: TenantKey, Namespace: ns, WithState: true}) {
		if err != nil {
			t.Fatalf("history of %s namespace %q: %v", TenantKey, ns, err)
		}
		if cp.State.String() != want[cp.Seq] {
			t.Fatalf("history of %s namespace %q: state of %d differs", TenantKey, ns, cp.Seq)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("history of %s namespace %q: %d checkpoints, want %d", TenantKey, ns, n, len(want))
	}
}

func (f *TenantKeys) checkRuns(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.RunQuery{{Thread: TenantKey}, {Tenant: Tenant}} {
		runs, err := rl.Runs(ctx, q)
		if err != nil || len(runs) != 1 || runs[0].ID != "rx" || runs[0].Thread != TenantKey || string(runs[0].Data) != `{"input":"secret"}` {
			t.Fatalf("runs %+v: %+v, %v", q, runs, err)
		}
	}
	evs, err := rl.Events(ctx, "rx", 0, 0)
	if err != nil || len(evs) != len(f.events) {
		t.Fatalf("events of rx: %+v, %v", evs, err)
	}
	for i, ev := range evs {
		if ev.Seq != f.events[i].Seq || string(ev.Data) != string(f.events[i].Data) {
			t.Fatalf("event %d of rx: %+v, want %+v", i, ev, f.events[i])
		}
	}
}

func (f *TenantKeys) checkListing(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    store.ThreadSearch
		want []string
	}{
		{"tenant", store.ThreadSearch{Tenant: Tenant}, []string{TenantKey}},
		{"metadata", store.ThreadSearch{Tenant: Tenant, Metadata: map[string]any{"kind": "chat"}}, []string{TenantKey}},
		{"status", store.ThreadSearch{Tenant: Tenant, Status: []store.ThreadStatus{f.status}}, []string{TenantKey}},
		{"by key", store.ThreadSearch{Tenant: Tenant, IDs: []string{TenantKey, TenantThread}}, []string{TenantKey}},
		{"all tenants", store.ThreadSearch{AllTenants: true, Sort: store.SortID}, []string{TenantKey, plainThread}},
		{"no tenant", store.ThreadSearch{}, []string{plainThread}},
	} {
		got, err := s.ListThreads(ctx, tc.q)
		if err != nil || !slices.Equal(threadIDs(got), tc.want) {
			t.Fatalf("list %s: %v, %v; want %v", tc.name, threadIDs(got), err, tc.want)
		}
		if n, err := s.CountThreads(ctx, tc.q); err != nil || n != int64(len(tc.want)) {
			t.Fatalf("count %s: %d, %v; want %d", tc.name, n, err, len(tc.want))
		}
	}
}

func threadIDs(ts []store.Thread) []string {
	out := make([]string, len(ts))
	for i, th := range ts {
		out[i] = th.ID
	}
	return out
}

func (f *TenantKeys) checkStorage(t *testing.T, s store.Store) {
	t.Helper()
	got, err := store.ThreadStorageOf(context.Background(), s, TenantKey)
	want := f.storage
	want.ThreadID = TenantKey
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("storage of %s:\n%+v, %v\nwant %+v", TenantKey, got, err, want)
	}
}

// checkGone: the bare id names nothing left.
func (f *TenantKeys) checkGone(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Thread(ctx, TenantThread); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("thread %s after keying: %v", TenantThread, err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: TenantThread}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load %s after keying: %v", TenantThread, err)
	}
	rl, _ := store.RunLogOf(s)
	if runs, err := rl.Runs(ctx, store.RunQuery{Thread: TenantThread}); err != nil || len(runs) != 0 {
		t.Fatalf("runs of %s after keying: %+v, %v", TenantThread, runs, err)
	}
	ls, _ := store.LeasesOf(s)
	if l, err := ls.Lease(ctx, TenantThread); err != nil || l.Token != 0 {
		t.Fatalf("lease of %s after keying: %+v", TenantThread, l)
	}
}

// checkUntouched: the thread without a tenant keeps its id, head and run.
func (f *TenantKeys) checkUntouched(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	th, err := s.Thread(ctx, plainThread)
	if err != nil || th.Tenant != "" || th.Head != 1 {
		t.Fatalf("thread %s: %+v, %v", plainThread, th, err)
	}
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: plainThread}); err != nil || cp.State.String() != f.y {
		t.Fatalf("head of %s: %v", plainThread, err)
	}
	rl, _ := store.RunLogOf(s)
	if r, err := rl.Run(ctx, "ry"); err != nil || r.Thread != plainThread {
		t.Fatalf("run ry: %+v, %v", r, err)
	}
}
