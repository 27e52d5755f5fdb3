package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// appendSteps appends n checkpoints to a thread, each on its head.
func appendSteps(ctx context.Context, s store.Store, thread string, n int) error {
	schema := state.MustSchema(state.WithField("n", state.ReducerReplace))
	var head int64
	d := state.EmptyDoc()
	if th, err := s.Thread(ctx, thread); err == nil && th.Head > 0 {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: thread})
		if err != nil {
			return err
		}
		head, d = cp.Seq, cp.State
	}
	for i := range n {
		nd, patch, err := schema.Apply(d, state.Update{"n": int(head) + i})
		if err != nil {
			return err
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Patch: patch, State: nd})
		if err != nil {
			return err
		}
		d, head = nd, cp.Seq
	}
	return nil
}

// walk lists a history: the seqs listed and the error it ended with.
func walk(ctx context.Context, s store.Store, r store.HistoryRequest) ([]int64, error) {
	var seqs []int64
	for cp, err := range s.History(ctx, r) {
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, cp.Seq)
	}
	return seqs, nil
}

// repeatingBackend lists row seq a second time, two rows below, as a
// damaged b-tree can.
type repeatingBackend struct {
	*inmem.Backend
	seq int64
}

func (b *repeatingBackend) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	rows, err := b.Backend.Rows(ctx, q)
	if i := slices.IndexFunc(rows, func(r driver.Row) bool { return r.Seq == b.seq }); q.Desc && i >= 0 && i+2 <= len(rows) {
		rows = slices.Insert(rows, i+2, rows[i])
	}
	return rows, err
}

// TestHistoryLostRows: a history walk that finds a checkpoint whose parent
// is missing (and which holds no snapshot, as a prune's boundary does), or
// rows out of order, ends with a CorruptError naming the checkpoint and
// what to do, after the rows above it; a walk that stops above the damage
// sees none.
func TestHistoryLostRows(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		deleted int64 // a row deleted behind the engine's back
		repeat  int64 // a row the backend lists twice
		req     store.HistoryRequest
		seq     int64 // the checkpoint the error names; 0: no error
		listed  int
		message string
	}{
		{"a deleted row", 20, 0, store.HistoryRequest{}, 21, 30, "its parent 20 is missing"},
		{"a deleted row, small pages", 20, 0, store.HistoryRequest{PageSize: 3}, 21, 30, "its parent 20 is missing"},
		{"a deleted row, from below", 20, 0, store.HistoryRequest{Before: 25}, 21, 4, "its parent 20 is missing"},
		{"above a deleted row", 20, 0, store.HistoryRequest{Limit: 30}, 0, 30, ""},
		{"the oldest row deleted", 1, 0, store.HistoryRequest{PageSize: 7}, 2, 49, "its parent 1 is missing"},
		{"a row listed twice", 0, 40, store.HistoryRequest{}, 40, 12, "listed after checkpoint 39"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mb := inmem.New()
			s := store.New(&repeatingBackend{mb, tc.repeat}, store.Options{SnapshotRatio: 1e9}) // one snapshot, at seq 1
			if err := appendSteps(ctx, s, "t", 50); err != nil {
				t.Fatal(err)
			}
			if tc.deleted != 0 {
				if _, err := mb.DeleteRanges(ctx, "t", "", 50, []driver.SeqRange{{From: tc.deleted, To: tc.deleted}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			r := tc.req
			r.Thread = "t"
			seqs, err := walk(ctx, s, r)
			var ce *store.CorruptError
			switch {
			case tc.seq == 0 && err != nil:
				t.Fatalf("listed %v, then %v", seqs, err)
			case tc.seq != 0 && (!errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || ce.Seq != tc.seq || ce.What != "history" ||
				!strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "PRAGMA integrity_check")):
				t.Fatalf("listed %v, then %v", seqs, err)
			case len(seqs) != tc.listed:
				t.Fatalf("listed %d rows, want %d: %v", len(seqs), tc.listed, seqs)
			}
		})
	}
}

// TestHistoryWhilePruning: history walks in small pages while a writer
// appends and a prune deletes the rows below them: a chain a prune cut
// during a walk is no damage, and no walk says it is.
func TestHistoryWhilePruning(t *testing.T) {
	s := store.New(inmem.New(), store.Options{SnapshotRatio: 0.5})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := appendSteps(ctx, s, "t", 40); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	pruned := int64(0)
	wg.Go(func() {
		for ctx.Err() == nil {
			res, err := s.Prune(ctx, store.PruneRequest{Thread: "t", KeepLast: 2})
			if err == nil {
				pruned += res.Checkpoints
				err = appendSteps(ctx, s, "t", 5)
			}
			if err != nil && ctx.Err() == nil {
				errs <- err
				return
			}
		}
	})
	var walks [3]int
	for i := range walks {
		wg.Go(func() {
			for ctx.Err() == nil {
				if seqs, err := walk(ctx, s, store.HistoryRequest{Thread: "t", PageSize: 2}); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("a walk listed %v, then: %w", seqs, err)
					return
				}
				walks[i]++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%v walks while the prunes deleted %d checkpoints", walks, pruned)
}
