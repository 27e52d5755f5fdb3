package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestLargeSnapshot: a state past a block (1 MiB encoded) is stored as a
// chunked snapshot — compressed or raw — and every checkpoint comes back
// exact, from a store with no cache too.
func TestLargeSnapshot(t *testing.T) {
	ctx := context.Background()
	schema := state.MustSchema(state.WithField("messages", state.ReducerAppend))
	for _, comp := range []bool{true, false} {
		t.Run(fmt.Sprintf("compress=%v", comp), func(t *testing.T) {
			b := inmem.New()
			s := store.New(b, store.Options{NoCompression: !comp, SnapshotCache: -1})
			var d state.Doc
			want := map[int64]string{}
			var head int64
			for i := range 12 {
				batch := make([]any, 600)
				for j := range batch {
					batch[j] = fmt.Sprintf("%d-%d %s", i, j, strings.Repeat("z", 300))
				}
				nd, patch, err := schema.Apply(d, state.Update{"messages": batch})
				if err != nil {
					t.Fatal(err)
				}
				cp, err := s.Append(ctx, store.Checkpoint{Thread: "big", Parent: head, Patch: patch, State: nd})
				if err != nil {
					t.Fatal(err)
				}
				d, head, want[cp.Seq] = nd, cp.Seq, nd.String()
			}
			chunked := 0
			rows, err := b.Rows(ctx, driver.RowQuery{Thread: "big", Snapshots: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.HasSnapshot && len(r.Snapshot) > 0 && r.Snapshot[0] == 3 {
					chunked++
				}
			}
			if comp && chunked == 0 {
				t.Fatal("no snapshot was stored in blocks")
			}
			for seq, w := range want {
				cp, err := s.Load(ctx, store.LoadRequest{Thread: "big", Seq: seq})
				if err != nil || cp.State.String() != w {
					t.Fatalf("checkpoint %d: %v", seq, err)
				}
			}
		})
	}
}
