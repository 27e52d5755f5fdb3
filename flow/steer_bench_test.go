package flow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkStepInbox is the cost of reading the thread's inbox before
// each step: a 100-step run of a one-node loop on SQLite, without an
// inbox and with an empty one (per step: b.N runs × 100 steps).
func BenchmarkStepInbox(b *testing.B) {
	const steps = 100
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("n", state.ReducerAdd))
	g, err := flow.NewGraph(schema).
		AddNode("step", func(ctx context.Context, d state.Doc) (state.Update, error) { return state.Update{"n": 1}, nil }).
		AddEdge(flow.START, "step").
		AddRouter("step", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var n int
			_ = d.Get("n", &n)
			if n < steps {
				return flow.To("step"), nil
			}
			return flow.To(flow.END), nil
		}).Compile()
	if err != nil {
		b.Fatal(err)
	}
	for _, withInbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("inbox=%v", withInbox), func(b *testing.B) {
			s, err := sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{}, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			opts := flow.Options{RecursionLimit: -1}
			if withInbox {
				if opts.Inbox, err = store.InboxOf(s); err != nil {
					b.Fatal(err)
				}
			}
			r, err := flow.NewRunner(g, s, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Invoke(context.Background(), fmt.Sprintf("t%d", i), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/step")
		})
	}
}
