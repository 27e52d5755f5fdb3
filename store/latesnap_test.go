package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// lateBackend is rowsBackend made safe for the snapshot worker, with
// AttachSnapshot: gate, when set, holds every attach until it is closed;
// fail makes every attach fail.
type lateBackend struct {
	mu sync.Mutex
	rowsBackend
	gate     chan struct{}
	fail     error
	attempts int
}

func (b *lateBackend) Insert(ctx context.Context, r driver.Row) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rowsBackend.Insert(ctx, r)
}

func (b *lateBackend) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rowsBackend.Rows(ctx, q)
}

// Thread returns the thread the first row created (an encrypted engine
// reads its tenant).
func (b *lateBackend) Thread(_ context.Context, id string) (driver.ThreadRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.rows) == 0 || b.rows[0].Create == nil {
		return driver.ThreadRecord{}, ErrNotFound
	}
	return *b.rows[0].Create, nil
}

func (b *lateBackend) AttachSnapshot(_ context.Context, r driver.Row, old uint32) (bool, error) {
	if b.gate != nil {
		<-b.gate
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
	if b.fail != nil {
		return false, b.fail
	}
	at := &b.rows[r.Seq-1]
	if at.Sum != old {
		return false, nil
	}
	at.HasSnapshot, at.Snapshot = true, r.Snapshot
	at.Base, at.Since, at.BaseSize, at.Sum = r.Base, r.Since, r.BaseSize, r.Sum
	return true, nil
}

func (b *lateBackend) snapshots() (seqs []int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.rows {
		if r.HasSnapshot {
			seqs = append(seqs, r.Seq)
		}
	}
	return seqs
}

// unwrittenBases counts the rows whose base row has no snapshot.
func (b *lateBackend) unwrittenBases() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.rows {
		if base := b.rows[r.Base-1]; r.Base != r.Seq && !base.HasSnapshot {
			n++
		}
	}
	return n
}

// appendProse appends n steps of prose-like messages to thread "t" and
// returns the state after each.
func appendProse(t *testing.T, e *Engine, n int) []string {
	t.Helper()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	doc := state.EmptyDoc()
	want := []string{""}
	for i := 1; i <= n; i++ {
		nd, p, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint(i), Content: prose(i, 20)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Append(context.Background(), Checkpoint{Thread: "t", Parent: int64(i - 1), Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
		want = append(want, nd.String())
	}
	return want
}

// loadAll loads every checkpoint, one by one and by a history walk.
func loadAll(t *testing.T, e *Engine, want []string) {
	t.Helper()
	ctx := context.Background()
	for seq := 1; seq < len(want); seq++ {
		cp, err := e.Load(ctx, LoadRequest{Thread: "t", Seq: int64(seq)})
		if err != nil || cp.State.String() != want[seq] {
			t.Fatalf("load %d: %v", seq, err)
		}
	}
	walkAll(t, e, want)
}

// walkAll walks the history with every state.
func walkAll(t *testing.T, e *Engine, want []string) {
	t.Helper()
	ctx := context.Background()
	n := 0
	for cp, err := range e.History(ctx, HistoryRequest{Thread: "t", WithState: true}) {
		if err != nil || cp.State.String() != want[cp.Seq] {
			t.Fatalf("history at %d: %v", cp.Seq, err)
		}
		n++
	}
	if n != len(want)-1 {
		t.Fatalf("history has %d checkpoints, want %d", n, len(want)-1)
	}
}

// TestLateSnapshots: snapshots after the first are written after their
// rows commit; every checkpoint loads right before, while and after they
// are written, and when they never are; loads write the ones that failed.
func TestLateSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    bool
		fail    error
		ring    bool
		minSnap int // snapshots at the end, the first included
	}{
		{name: "written", minSnap: 3},
		{name: "held", gate: true, minSnap: 2},
		{name: "failed", fail: errors.New("disk full"), minSnap: 1},
		{name: "failed, encrypted", fail: errors.New("disk full"), ring: true, minSnap: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &lateBackend{fail: tc.fail}
			if tc.gate {
				b.gate = make(chan struct{})
			}
			opts := Options{SnapshotCache: -1}
			if tc.ring {
				opts.Keyring = testRing(t, 7)
			}
			e := New(b, opts)
			want := appendProse(t, e, 300)
			loadAll(t, e, want)
			if tc.gate {
				if got := b.snapshots(); len(got) != 1 {
					t.Fatalf("snapshots %v while the attach is held: want the first only", got)
				}
				close(b.gate)
			}
			e.WaitSnapshots()
			loadAll(t, e, want)
			snaps := b.snapshots()
			if len(snaps) < tc.minSnap {
				t.Fatalf("snapshots at %v, want at least %d", snaps, tc.minSnap)
			}
			if tc.fail != nil && b.attempts < 2 {
				t.Fatalf("%d attaches tried: a failed one must be asked again", b.attempts)
			}
			for _, r := range b.rows {
				if r.HasSnapshot && (r.Base != r.Seq || r.BaseSize != int64(len(r.Snapshot))) {
					t.Fatalf("row %d: snapshot with base %d, size %d of %d", r.Seq, r.Base, r.BaseSize, len(r.Snapshot))
				}
				if r.HasSnapshot && tc.ring && !isSealed(r.Snapshot) {
					t.Fatalf("row %d: the snapshot of an encrypted store is stored in the clear", r.Seq)
				}
			}
			if tc.fail != nil {
				// Once attaches work again, a history walk writes what
				// failed (and so would loads).
				b.mu.Lock()
				b.fail = nil
				b.mu.Unlock()
				walkAll(t, e, want)
				e.WaitSnapshots()
			}
			if n := b.unwrittenBases(); n != 0 {
				t.Fatalf("%d rows name a snapshot never written", n)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			loadAll(t, New(b, opts), want)
		})
	}
}

// TestLateSnapshotsReadOnly: on a store opened read-only, a load that
// replays through an unwritten late snapshot tries to write it once,
// quietly, and then no more.
func TestLateSnapshotsReadOnly(t *testing.T) {
	b := &lateBackend{fail: fmt.Errorf("%w: test", ErrReadOnly)}
	var logged bytes.Buffer
	e := New(b, Options{SnapshotCache: -1, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer e.Close()
	want := appendProse(t, e, 200)
	e.WaitSnapshots()
	loadAll(t, e, want)
	e.WaitSnapshots()
	before := b.attempts
	loadAll(t, e, want)
	e.WaitSnapshots()
	if b.attempts != before {
		t.Fatalf("%d attaches tried after the store was found read-only", b.attempts-before)
	}
	if logged.Len() != 0 {
		t.Fatalf("warnings for a read-only store:\n%s", logged.String())
	}
}
