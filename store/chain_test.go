package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// countingBackend counts the rows a backend returns.
type countingBackend struct {
	*inmem.Backend
	rows int
}

func (c *countingBackend) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	rows, err := c.Backend.Rows(ctx, q)
	c.rows += len(rows)
	return rows, err
}

// TestForkFarFromItsSnapshot: a checkpoint forked from early in a long
// history whose snapshot is far back loads from its own few ancestors,
// not every row since the snapshot; its state and the old head's are exact.
func TestForkFarFromItsSnapshot(t *testing.T) {
	ctx := context.Background()
	b := &countingBackend{Backend: inmem.New()}
	s := store.New(b, store.Options{SnapshotRatio: 1e9, SnapshotCache: -1}) // one snapshot, at the start
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend), state.WithField("n", state.ReducerReplace))
	var d state.Doc
	var head int64
	want := map[int64]string{}
	for i := 1; i <= 2*4096+100; i++ {
		nd, patch, err := schema.Apply(d, state.Update{"log": fmt.Sprint(i), "n": i})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "long", Parent: head, Patch: patch, State: nd})
		if err != nil {
			t.Fatal(err)
		}
		d, head, want[cp.Seq] = nd, cp.Seq, nd.String()
	}
	fk, err := s.Fork(ctx, store.ForkRequest{Thread: "long", At: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		seq     int64
		want    string
		maxRows int
	}{
		{"the fork", fk.Seq, want[10], 20},
		{"the old tip", head, want[head], int(head) + 10},
		{"deep in history", 5000, want[5000], 5010},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.rows = 0
			cp, err := s.Load(ctx, store.LoadRequest{Thread: "long", Seq: tc.seq})
			if err != nil || cp.State.String() != tc.want {
				t.Fatalf("load %d: %v", tc.seq, err)
			}
			if b.rows > tc.maxRows {
				t.Fatalf("load %d read %d rows, at most %d expected", tc.seq, b.rows, tc.maxRows)
			}
		})
	}
}
