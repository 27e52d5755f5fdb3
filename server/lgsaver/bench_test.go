package lgsaver

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// walkOnly is a store whose index of external ids the saver cannot see:
// it finds ids as it did before format 8, by walking the namespace. It
// counts the checkpoints its walks read.
type walkOnly struct {
	store.Store
	read *int
}

func (w walkOnly) History(ctx context.Context, r store.HistoryRequest) iter.Seq2[store.Checkpoint, error] {
	return func(yield func(store.Checkpoint, error) bool) {
		for cp, err := range w.Store.History(ctx, r) {
			*w.read++
			if !yield(cp, err) {
				return
			}
		}
	}
}

// BenchmarkColdGet: a get of the oldest of 10,000 checkpoints of a
// namespace by its id, in a process that has not seen the namespace (a
// new Saver each time), on SQLite; "walk" finds the id as the saver did
// before format 8.
func BenchmarkColdGet(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.OpenStore(ctx, filepath.Join(b.TempDir(), "s.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const n = 10000
	d := state.EmptyDoc()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("c%05d", i)
		p := state.Patch{{Op: state.OpAdd, Path: "/count", Value: []byte(fmt.Sprint(i))}}
		if d, err = d.Apply(p); err != nil {
			b.Fatal(err)
		}
		rec := lgRecord{Checkpoint: lgHeader{V: 4, ID: id, TS: "2026-01-01T00:00:00Z"}}
		if _, err := st.Append(ctx, store.Checkpoint{Thread: "t", Parent: int64(i - 1), Patch: p, State: d, ExternalID: id,
			Meta: store.Meta{Extra: map[string]any{lgExtraKey: rec}}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		walk bool
	}{{"walk", true}, {"index", false}} {
		b.Run(tc.name, func(b *testing.B) {
			read := 0
			var s store.Store = st
			if tc.walk {
				s = walkOnly{st, &read}
			}
			for b.Loop() {
				sv := New(Config{Store: s})
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("POST", "/checkpointer/get", strings.NewReader(`{"thread_id": "t", "checkpoint_id": "c00001"}`))
				if err := sv.getCheckpoint(rec, req); err != nil || rec.Code != http.StatusOK {
					b.Fatal(err, rec.Code)
				}
			}
			b.ReportMetric(float64(read)/float64(b.N), "walked/op")
		})
	}
}
