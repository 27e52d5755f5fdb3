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
			s, err := sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{Durability: d}, store.Options{})
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

// w1Store writes a W1 thread of n steps and returns the open store.
func w1Store(b *testing.B, n int) store.Store {
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	doc := state.EmptyDoc()
	var head int64
	pad := strings.Repeat("x", 180)
	for i := 1; i <= n; i++ {
		c := "t0-step-" + strconv.Itoa(i) + "-" + pad
		nd, p, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: "m" + strconv.Itoa(i), Role: "assistant", Content: c}, "count": i, "last": c})
		if err != nil {
			b.Fatal(err)
		}
		cp, err := s.Append(context.Background(), store.Checkpoint{Thread: "0", Parent: head, Nodes: []string{"step"}, Patch: p, State: nd})
		if err != nil {
			b.Fatal(err)
		}
		head, doc = cp.Seq, nd
	}
	return s
}

// BenchmarkLoadHead loads the head state of a 3000-step W1 thread.
func BenchmarkLoadHead(b *testing.B) {
	s := w1Store(b, 3000)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(context.Background(), store.LoadRequest{Thread: "0"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistoryWalk walks a 3000-step W1 thread, materialising every state.
func BenchmarkHistoryWalk(b *testing.B) {
	s := w1Store(b, 3000)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range s.History(context.Background(), store.HistoryRequest{Thread: "0", WithState: true, PageSize: 256}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 3000 {
			b.Fatal(n)
		}
	}
}
