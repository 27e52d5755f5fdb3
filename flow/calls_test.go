package flow_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// writeCounter counts a store's PutWrites calls (each its own
// transaction).
type writeCounter struct {
	store.Store
	puts atomic.Int64
}

func (w *writeCounter) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []store.Write) error {
	w.puts.Add(1)
	return w.Store.PutWrites(ctx, thread, ns, seq, ws)
}

// TestCallRecordsCommitWithStep: a node's call records (RecordCall) cost
// no write of their own: they are stored by the step's commit, or with
// the task's next journal entry (Record) when it makes one; either way
// they end at the checkpoint the step read.
func TestCallRecordsCommitWithStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		journal bool
		puts    int64
	}{
		{"with the commit", false, 0},
		{"with a journal entry", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := &writeCounter{Store: inmem.Open(store.Options{})}
			schema := state.MustSchema(state.WithField("n", state.ReducerReplace))
			g, err := flow.NewGraph(schema).AddNode("work", func(ctx context.Context, _ state.Doc) (state.Update, error) {
				for range 2 {
					if err := flow.RecordCall(ctx, flow.BeginCall(ctx), map[string]string{"kind": "model"}); err != nil {
						return nil, err
					}
				}
				if tc.journal {
					if _, err := flow.Record(ctx, "model/0", map[string]int{"n": 1}); err != nil {
						return nil, err
					}
				}
				return state.Update{"n": 1}, nil
			}).AddEdge(flow.START, "work").AddEdge("work", flow.END).Compile()
			if err != nil {
				t.Fatal(err)
			}
			r, err := flow.NewRunner(g, s, flow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Invoke(ctx, "t", state.Update{"n": 0}); err != nil {
				t.Fatal(err)
			}
			if got := s.puts.Load(); got != tc.puts {
				t.Fatalf("%d PutWrites, want %d", got, tc.puts)
			}
			ws, err := s.Writes(ctx, "t", "", 1)
			if err != nil {
				t.Fatal(err)
			}
			var calls int
			for _, w := range ws {
				if strings.Contains(w.Task, "/"+flow.CallRecordPrefix) {
					calls++
				}
			}
			if calls != 2 {
				t.Fatalf("%d call records at the checkpoint the step read, want 2: %+v", calls, ws)
			}
		})
	}
}
