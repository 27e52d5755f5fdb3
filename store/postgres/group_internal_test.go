package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// TestGroupSameKey: two rows of one batch extend the same head (writers
// racing on it): exactly one is written and reported written, the other
// is a conflict. Matching the INSERT's RETURNING by key alone reported
// both as written.
func TestGroupSameKey(t *testing.T) {
	ctx := context.Background()
	dsn, _ := pgtest.Schema(t, "cairn_t")
	b, err := Open(ctx, dsn, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	row := func(seq, parent, at int64, patch string) driver.Row {
		r := driver.Row{Thread: "race", Seq: seq, Parent: parent, Status: store.StatusSuccess, CreatedAt: at, Patch: []byte(patch), Base: 1}
		if seq == 1 {
			r.Create = &driver.ThreadRecord{ID: "race", CreatedAt: at}
			r.Create.Sum = driver.ThreadChecksum(r.Create)
		}
		r.Sum = driver.RowChecksum(&r)
		return r
	}
	if err := b.Insert(ctx, row(1, 0, 1, "first")); err != nil {
		t.Fatal(err)
	}
	for round := int64(0); round < 5; round++ {
		seq := round + 2
		batch := []*insertJob{{row: row(seq, seq-1, 10*seq, "a")}, {row: row(seq, seq-1, 10*seq+1, "b")}}
		errs, err := b.group.commit(batch)
		if err != nil {
			t.Fatal(err)
		}
		wins := 0
		for _, e := range errs {
			switch {
			case e == nil:
				wins++
			case !errors.Is(e, store.ErrConflict):
				t.Fatalf("round %d: %v", round, e)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d rows reported written, want 1 (%v)", round, wins, errs)
		}
	}
}
