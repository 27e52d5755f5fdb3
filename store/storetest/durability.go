package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

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
	// Each step waits for the snapshot it queued: while one is being
	// written no other is queued, so a slow writer would leave fewer
	// snapshots than the policy places.
	for i := 1; i <= n; i++ {
		bad.step(i)
		good.step(i)
		settle(s)
	}
	// Damage the first snapshot after seq 2, and the patch of the head,
	// which must replay from a later snapshot.
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
