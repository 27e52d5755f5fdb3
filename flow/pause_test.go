package flow_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// countedChain is a → b → c of logNodes; ran counts each node's runs.
func countedChain(ran map[string]*atomic.Int32) *flow.Graph {
	g := flow.NewGraph(schema)
	for _, n := range []string{"a", "b", "c"} {
		ran[n] = &atomic.Int32{}
		g.AddNode(n, func(ctx context.Context, d state.Doc) (state.Update, error) {
			ran[n].Add(1)
			return logNode(n)(ctx, d)
		})
	}
	return g.Chain("a", "b", "c")
}

// TestUpdateAtPauseContinues: a person edits the state at a pause before
// b; a Resume without an answer continues through b (the pause was seen),
// keeps the edit and runs a once. A later pause still fires, and so does
// the pause of a fresh run.
func TestUpdateAtPauseContinues(t *testing.T) {
	tests := []struct {
		name   string
		update func(ctx context.Context, r *flow.Runner, pause flow.Result) error
	}{
		{"UpdateState at the head", func(ctx context.Context, r *flow.Runner, _ flow.Result) error {
			_, err := r.UpdateState(ctx, "t", state.Update{"log": "edit"}, "a")
			return err
		}},
		{"UpdateStateAt the paused checkpoint", func(ctx context.Context, r *flow.Runner, pause flow.Result) error {
			_, err := r.UpdateStateAt(ctx, "t", pause.Head, state.Update{"log": "edit"}, "a")
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ran := map[string]*atomic.Int32{}
			r := newRunner(t, countedChain(ran), inmem.Open(store.Options{}), flow.Options{InterruptBefore: []string{"b", "c"}})
			pause, err := r.Invoke(ctx, "t", nil)
			if err != nil || pause.StopReason != state.StopInterrupt {
				t.Fatalf("first run: %v %v", pause.StopReason, err)
			}
			if err := tc.update(ctx, r, pause); err != nil {
				t.Fatal(err)
			}
			res, err := r.Resume(ctx, "t", nil)
			if err != nil || res.StopReason != state.StopInterrupt || !slices.Equal(logOf(t, res.State), []string{"a", "edit", "b"}) {
				t.Fatalf("resume after the update: %v %v %v (b must run, then the pause before c)", logOf(t, res.State), res.StopReason, err)
			}
			res, err = r.Resume(ctx, "t", nil)
			if err != nil || res.StopReason != state.StopSuccess || !slices.Equal(logOf(t, res.State), []string{"a", "edit", "b", "c"}) {
				t.Fatalf("end: %v %v %v", logOf(t, res.State), res.StopReason, err)
			}
			if ran["a"].Load() != 1 || ran["b"].Load() != 1 || ran["c"].Load() != 1 {
				t.Fatalf("runs: a %d, b %d, c %d", ran["a"].Load(), ran["b"].Load(), ran["c"].Load())
			}
			res, err = r.Invoke(ctx, "t", nil)
			if err != nil || res.StopReason != state.StopInterrupt || res.Next[0].Node != "b" {
				t.Fatalf("a fresh run: %v %+v %v (it pauses before b)", res.StopReason, res.Next, err)
			}
		})
	}
}

// TestUpdateAtPauseThenUpdateAsStart: an update written as START re-runs
// the chain from a; the pause before b fires again, since b reads what a
// wrote after the update.
func TestUpdateAtPauseThenUpdateAsStart(t *testing.T) {
	ctx := context.Background()
	ran := map[string]*atomic.Int32{}
	r := newRunner(t, countedChain(ran), inmem.Open(store.Options{}), flow.Options{InterruptBefore: []string{"b"}})
	if _, err := r.Invoke(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.UpdateState(ctx, "t", state.Update{"log": "edit"}, flow.START); err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || !slices.Equal(logOf(t, res.State), []string{"a", "edit", "a"}) || ran["b"].Load() != 0 {
		t.Fatalf("resume: %v %v %v, b ran %d times", logOf(t, res.State), res.StopReason, err, ran["b"].Load())
	}
}

// TestPauseAfterThenBefore: a Resume at a pause after a (interrupt_after)
// runs b although b has a pause before it: one pause, as LangGraph makes it.
func TestPauseAfterThenBefore(t *testing.T) {
	ctx := context.Background()
	ran := map[string]*atomic.Int32{}
	r := newRunner(t, countedChain(ran), inmem.Open(store.Options{}), flow.Options{InterruptAfter: []string{"a"}, InterruptBefore: []string{"b"}})
	res, err := r.Invoke(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || !slices.Equal(logOf(t, res.State), []string{"a"}) {
		t.Fatalf("first run: %v %v %v", logOf(t, res.State), res.StopReason, err)
	}
	res, err = r.Resume(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopSuccess || !slices.Equal(logOf(t, res.State), []string{"a", "b", "c"}) {
		t.Fatalf("resume: %v %v %v", logOf(t, res.State), res.StopReason, err)
	}
}

// TestCrashBeforePauseStillPauses: a run cut short before the step that a
// pause guards (a crash, a cancel) has not paused: its Resume pauses.
func TestCrashBeforePauseStillPauses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", func(ctx context.Context, d state.Doc) (state.Update, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	}).AddNode("c", logNode("c")).Chain("a", "b", "c")
	if _, err := newRunner(t, g, s, flow.Options{}).Invoke(ctx, "t", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cut run: %v", err)
	}
	res, err := newRunner(t, g, s, flow.Options{InterruptBefore: []string{"b"}}).Resume(context.Background(), "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || res.Next[0].Node != "b" {
		t.Fatalf("resume: %v %+v %v (it pauses before b)", res.StopReason, res.Next, err)
	}
}
