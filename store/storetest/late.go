package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// openEngine opens a store of h, skipping the test unless it is an engine.
func openEngine(t *testing.T, h Harness) (store.Store, *store.Engine) {
	t.Helper()
	s := open(t, h)
	e, ok := s.(*store.Engine)
	if !ok {
		t.Skip("not an engine")
	}
	return s, e
}

// testLateSnapshots: on a backend that attaches snapshots after their
// rows commit (driver.SnapshotAttacher), the engine's late snapshots land on
// rows past the first with their bookkeeping rewritten, every checkpoint
// rebuilds before and after, and an attach whose row no longer has the
// checksum it names writes nothing.
func testLateSnapshots(t *testing.T, h Harness) {
	ctx := context.Background()
	s, e := openEngine(t, h)
	at, ok := e.Backend().(driver.SnapshotAttacher)
	if !ok {
		t.Skip("the backend writes snapshots inside their commits")
	}
	m := newModel(t, s, "late")
	for i := 1; i <= 120; i++ {
		m.step(i)
	}
	m.checkAll() // before the worker is done
	e.WaitSnapshots()
	rows, err := e.Backend().Rows(ctx, driver.RowQuery{Thread: "late", Snapshots: true})
	if err != nil {
		t.Fatal(err)
	}
	var late *driver.Row
	for i := range rows {
		r := &rows[i]
		if r.HasSnapshot && (r.Base != r.Seq || r.Since != 0 || r.BaseSize != int64(len(r.Snapshot))) {
			t.Fatalf("row %d: snapshot %d bytes, base %d, since %d, base size %d", r.Seq, len(r.Snapshot), r.Base, r.Since, r.BaseSize)
		}
		if r.HasSnapshot && r.Seq > 1 && late == nil {
			late = r
		}
	}
	if late == nil {
		t.Fatal("no snapshot after the first: the policy asked for none, or none was attached")
	}
	m.checkAll()

	// A stale attach (the checksum of a row written before) changes nothing.
	stale := rows[len(rows)-1]
	stale.Snapshot, stale.HasSnapshot = late.Snapshot, true
	stale.Base, stale.Since, stale.BaseSize = stale.Seq, 0, int64(len(late.Snapshot))
	written, err := at.AttachSnapshot(ctx, stale, stale.Sum^1)
	if err != nil || written {
		t.Fatalf("stale attach: written %v, %v", written, err)
	}
	gone := stale
	gone.Seq = 10_000
	if written, err := at.AttachSnapshot(ctx, gone, gone.Sum); err != nil || written {
		t.Fatalf("attach to a missing row: written %v, %v", written, err)
	}
	after, err := e.Backend().Rows(ctx, driver.RowQuery{Thread: "late", From: stale.Seq, To: stale.Seq})
	if err != nil || len(after) != 1 || after[0].HasSnapshot != rows[len(rows)-1].HasSnapshot || after[0].Sum != rows[len(rows)-1].Sum {
		t.Fatalf("row %d after the stale attaches: %+v, %v", stale.Seq, after, err)
	}
	m.checkAll()
}

// testEmptyThread: an engine empties a thread in place — its checkpoints
// (every namespace) go, the thread and its metadata stay, and it starts
// again from its first checkpoint.
func testEmptyThread(t *testing.T, h Harness) {
	ctx := context.Background()
	s, e := openEngine(t, h)
	if _, err := s.CreateThread(ctx, store.Thread{ID: "empty", Metadata: map[string]any{"keep": "me"}}); err != nil {
		t.Fatal(err)
	}
	m := newModel(t, s, "empty")
	for i := 1; i <= 40; i++ {
		m.step(i)
	}
	sub := newModel(t, s, "empty")
	sub.ns = "child:1"
	for i := 1; i <= 3; i++ {
		sub.step(i)
	}
	if err := e.EmptyThread(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	th, err := s.Thread(ctx, "empty")
	if err != nil || th.Head != 0 || th.Metadata["keep"] != "me" {
		t.Fatalf("after emptying: %+v, %v", th, err)
	}
	if nss, err := s.Namespaces(ctx, "empty"); err != nil || len(nss) != 0 {
		t.Fatalf("namespaces after emptying: %+v, %v", nss, err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "empty"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load after emptying: %v", err)
	}
	again := newModel(t, s, "empty")
	again.step(1)
	again.checkLoad(1)
	if err := e.EmptyThread(ctx, "no-such-thread"); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("emptying a missing thread: %v", err)
	}
}
