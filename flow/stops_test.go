package flow_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

type tally struct {
	state.Base
	Count int `json:"count" cairn:"add"`
}

// tallyGraph counts for ever under state.Base's rules.
func tallyGraph(t *testing.T) *flow.Compiled {
	t.Helper()
	typed, err := state.NewTyped[tally]()
	if err != nil {
		t.Fatal(err)
	}
	g, err := flow.NewGraph(typed.Schema()).AddNode("n", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"count": 1}, nil
	}).AddEdge(flow.START, "n").AddEdge("n", "n").WithRules(baserules.Rules()).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStopOnRecordDurabilities: in every durability mode a budget stop
// is recorded in a checkpoint of its own, a resume with a larger budget
// takes it back in its first checkpoint, and every stored checkpoint is
// its parent with its patch applied (read back from a reopened store).
func TestStopOnRecordDurabilities(t *testing.T) {
	for _, d := range []flow.Durability{flow.DurabilitySync, flow.DurabilityAsync, flow.DurabilityExit} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "s.db")
			s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := flow.NewRunner(tallyGraph(t), s, flow.Options{Durability: d})
			if err != nil {
				t.Fatal(err)
			}
			two, four := flow.RunOptions{Budget: flow.Budget{MaxSteps: 2}}, flow.RunOptions{Budget: flow.Budget{MaxSteps: 4}}
			res, err := r.Invoke(ctx, "t", state.Update{"max_steps": 100}, two)
			if err != nil || res.StopReason != state.StopBudgetSteps {
				t.Fatalf("invoke: %s %v", res.StopReason, err)
			}
			first := res.Head
			if res, err = r.Resume(ctx, "t", nil, two); err != nil || res.StopReason != state.StopBudgetSteps || res.Head != first {
				t.Fatalf("resume with the same budget: %s at %d (%v), want budget_steps at %d", res.StopReason, res.Head, err, first)
			}
			if res, err = r.Resume(ctx, "t", nil, four); err != nil || res.StopReason != state.StopBudgetSteps || countOf(t, res.State) != 4 {
				t.Fatalf("resume with a larger budget: %s count %d (%v)", res.StopReason, countOf(t, res.State), err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkPatches(t, ctx, s, "t", 2)
		})
	}
}

// checkPatches checks that each checkpoint of thread is its parent with
// its patch applied, and that stops checkpoints record a stop (PARTIAL,
// budget_steps, in stop_reason).
func checkPatches(t *testing.T, ctx context.Context, s store.Store, thread string, stops int) {
	t.Helper()
	var cps []store.Checkpoint
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	slices.Reverse(cps) // oldest first
	states := map[int64]state.Doc{}
	n := 0
	for _, cp := range cps {
		states[cp.Seq] = cp.State
		if parent, ok := states[cp.Parent]; ok {
			got, err := parent.Apply(cp.Patch)
			if err != nil || got.String() != cp.State.String() {
				t.Fatalf("checkpoint %d: parent + patch %v = %s (%v), stored %s", cp.Seq, cp.Patch, got, err, cp.State)
			}
		}
		if cp.Meta.Source != "stop" {
			continue
		}
		n++
		if raw, _ := cp.State.Raw("stop_reason"); cp.Status != store.StatusPartial || cp.Meta.StopReason != "budget_steps" || string(raw) != `"budget_steps"` {
			t.Fatalf("stop checkpoint %d: %s %q, stop_reason %s", cp.Seq, cp.Status, cp.Meta.StopReason, raw)
		}
	}
	if n != stops {
		t.Fatalf("%d stop checkpoints, want %d", n, stops)
	}
}

// TestStopOnRecordWithoutBaseRules: a graph whose state has no
// stop_reason still records a budget stop (PARTIAL, Meta.StopReason, an
// empty patch) and goes on with a larger budget.
func TestStopOnRecordWithoutBaseRules(t *testing.T) {
	ctx := context.Background()
	s, r := sqliteRunner(t, loopGraph(t, nil), flow.Options{Budget: flow.Budget{MaxSteps: 3}, RecursionLimit: -1})
	res, err := r.Invoke(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopBudgetSteps {
		t.Fatal(res.StopReason, err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil || head.Status != store.StatusPartial || head.Meta.StopReason != "budget_steps" || len(head.Patch) != 0 || countOf(t, head.State) != 3 {
		t.Fatalf("head %+v (%v)", head, err)
	}
	if res, err = r.Resume(ctx, "t", nil, flow.RunOptions{Budget: flow.Budget{MaxSteps: 5}}); err != nil || countOf(t, res.State) != 5 {
		t.Fatalf("resume: %s %v", res.StopReason, err)
	}
}

// TestForkOfARecordedStop: a fork from the checkpoint that records a stop
// is a new run: its branch takes the stop back and runs.
func TestForkOfARecordedStop(t *testing.T) {
	ctx := context.Background()
	s, r := sqliteRunner(t, tallyGraph(t), flow.Options{})
	res, err := r.Invoke(ctx, "t", state.Update{"max_steps": 2})
	if err != nil || res.StopReason != state.StopMaxSteps {
		t.Fatal(res.StopReason, err)
	}
	stopped := res.Head
	// A fork that raises max_steps goes on from the stop.
	res, err = r.RunFrom(ctx, "t", stopped, state.Patch{{Op: state.OpReplace, Path: "/max_steps", Value: []byte("4")}})
	if err != nil || res.StopReason != state.StopMaxSteps || countOf(t, res.State) != 4 {
		t.Fatalf("fork: %s count %d (%v)", res.StopReason, countOf(t, res.State), err)
	}
	checkStops(t, ctx, s, 2, state.StopMaxSteps)
}

// checkStops counts the thread's stop checkpoints.
func checkStops(t *testing.T, ctx context.Context, s store.Store, want int, reason state.StopReason) {
	t.Helper()
	n := 0
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Meta.Source == "stop" && cp.Meta.StopReason == string(reason) {
			n++
		}
	}
	if n != want {
		t.Fatalf("%d %s stop checkpoints, want %d", n, reason, want)
	}
}

// sqliteRunner opens a SQLite store (closed when the test ends) and a
// runner of g on it.
func sqliteRunner(t *testing.T, g *flow.Compiled, opts flow.Options) (store.Store, *flow.Runner) {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r, err := flow.NewRunner(g, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}
