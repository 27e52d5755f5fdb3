package sqlite_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkAppendStep measures one W1 step against SQLite: reducers plus a
// durable checkpoint (the store alone, without a runner).
func BenchmarkAppendStep(b *testing.B) {
	for _, d := range []sqlite.Durability{sqlite.DurabilitySync, sqlite.DurabilityStrict} {
		b.Run(string(d), func(b *testing.B) {
			s, err := sqlite.OpenStore(filepath.Join(b.TempDir(), "b.db"), sqlite.Options{Durability: d}, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
			ctx := context.Background()
			doc := state.EmptyDoc()
			var head int64
			pad := strings.Repeat("x", 180)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := "t0-step-" + strconv.Itoa(i) + "-" + pad
				nd, p, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: "m" + strconv.Itoa(i), Role: "assistant", Content: c}, "count": i, "last": c})
				if err != nil {
					b.Fatal(err)
				}
				cp, err := s.Append(ctx, store.Checkpoint{Thread: "0", Parent: head, Nodes: []string{"step"}, Patch: p, State: nd})
				if err != nil {
					b.Fatal(err)
				}
				head, doc = cp.Seq, nd
			}
		})
	}
}
