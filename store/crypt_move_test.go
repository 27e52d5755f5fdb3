package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/storetest"
)

// TestEncryptedRowMoved moves stored rows the way someone with write
// access to the database could — another thread, seq or tenant, with the
// checksums recomputed so that only the encryption can tell: each read is
// a CorruptError.
func TestEncryptedRowMoved(t *testing.T) {
	ctx := context.Background()
	schema := state.MustSchema()
	for _, tc := range []struct {
		name   string
		tamper func(b *inmem.Backend)
		load   store.LoadRequest
	}{
		{"row to another seq", func(b *inmem.Backend) {
			b.MoveRow(store.Ref{Thread: "a", Seq: 3}, store.Ref{Thread: "a", Seq: 5})
			b.Tamper("a", "", 5, func(r *driver.Row) { r.Parent = 2; r.Sum = driver.RowChecksum(r) })
		}, store.LoadRequest{Thread: "a", Seq: 5}},
		{"row to another thread", func(b *inmem.Backend) {
			b.MoveRow(store.Ref{Thread: "a", Seq: 2}, store.Ref{Thread: "b", Seq: 2})
			b.Tamper("b", "", 2, func(r *driver.Row) { r.Sum = driver.RowChecksum(r) })
		}, store.LoadRequest{Thread: "b", Seq: 2}},
		{"thread to another tenant", func(b *inmem.Backend) {
			b.TamperThread("a", func(r *driver.ThreadRecord) { r.Tenant = "other"; r.Sum = driver.ThreadChecksum(r) })
		}, store.LoadRequest{Thread: "a", Seq: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := inmem.New()
			ring := storetest.TestKeyring(t, 1)
			s := store.New(b, store.Options{Keyring: ring, SnapshotCache: -1})
			for _, th := range []string{"a", "b"} {
				if _, err := s.CreateThread(ctx, store.Thread{ID: th, Tenant: "acme"}); err != nil {
					t.Fatal(err)
				}
				doc := state.EmptyDoc()
				for i := range 4 {
					next, patch, _ := schema.Apply(doc, state.Update{"n": i, th: "x"})
					if _, err := s.Append(ctx, store.Checkpoint{Thread: th, Parent: int64(i), Patch: patch, State: next}); err != nil {
						t.Fatal(err)
					}
					doc = next
				}
			}
			tc.tamper(b)
			// A fresh engine: no cached tenant or state hides the change.
			_, err := store.New(b, store.Options{Keyring: ring, SnapshotCache: -1}).Load(ctx, tc.load)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Thread != tc.load.Thread || !strings.Contains(err.Error(), "authentication failed") {
				t.Fatalf("load %+v: %v, want a CorruptError", tc.load, err)
			}
		})
	}
}
