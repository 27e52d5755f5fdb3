package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
)

// TestGroupCommit appends to 60 threads at once, with stale appends mixed
// in: the appends share transactions, and each stale one alone is refused
// — the others of its batch commit. With group commit off the outcome is
// the same.
func TestGroupCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts postgres.Options
	}{{"grouped", postgres.Options{MaxConns: 8}}, {"one by one", postgres.Options{MaxConns: 8, NoGroupCommit: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b, err := postgres.Open(ctx, schemaDSN(t), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			s := store.New(b, store.Options{})
			defer s.Close()
			const threads, steps = 60, 20
			var wg sync.WaitGroup
			errs := make(chan error, threads*steps*2)
			for i := range threads {
				wg.Go(func() {
					thread := fmt.Sprint("t", i)
					doc := state.Doc{}
					for seq := int64(1); seq <= steps; seq++ {
						next, patch, err := state.MustSchema(state.WithField("n", state.ReducerReplace)).Apply(doc, state.Update{"n": seq})
						if err != nil {
							errs <- err
							return
						}
						cp := store.Checkpoint{Thread: thread, Parent: seq - 1, Nodes: []string{"n"}, Patch: patch, State: next, ExternalID: fmt.Sprint("id", seq)}
						if _, err := s.Append(ctx, cp); err != nil {
							errs <- fmt.Errorf("%s seq %d: %w", thread, seq, err)
							return
						}
						// A stale writer: the same parent again.
						if seq > 1 && i%3 == 0 {
							if _, err := s.Append(ctx, cp); !errors.Is(err, store.ErrConflict) {
								errs <- fmt.Errorf("%s: a stale append gave %v, want a conflict", thread, err)
								return
							}
						}
						doc = next
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for i := range threads {
				th, err := s.Thread(ctx, fmt.Sprint("t", i))
				if err != nil || th.Head != steps {
					t.Fatalf("thread %d: head %d, %v", i, th.Head, err)
				}
				cp, err := s.Load(ctx, store.LoadRequest{Thread: th.ID})
				var n int64
				if err != nil || cp.State.Get("n", &n) != nil || n != steps {
					t.Fatalf("thread %d: state %v, %v", i, cp.State, err)
				}
				if cp, err := s.ByExternalID(ctx, th.ID, "", "id7"); err != nil || cp.Seq != 7 {
					t.Fatalf("thread %d: external id id7: %+v, %v", i, cp, err)
				}
			}
			st := b.GroupStats()
			if tc.opts.NoGroupCommit != (st.Transactions == 0) {
				t.Fatalf("group stats %+v", st)
			}
			if st.Transactions > 0 && st.Rows <= st.Transactions {
				t.Fatalf("no batch held more than one row: %+v", st)
			}
			t.Logf("%+v", st)
		})
	}
}
