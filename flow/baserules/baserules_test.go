package baserules_test

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

type research struct {
	state.Base
	Notes []string `json:"notes" cairn:"append"`
}

// loop is a graph of one node that runs forever unless a rule stops it;
// upd is what the node returns at each step (given current_step).
func loop(t *testing.T, typed *state.Typed[research], upd func(step int) state.Update) *flow.Compiled {
	t.Helper()
	g, err := flow.NewGraph(typed.Schema()).AddNode("think", func(ctx context.Context, d state.Doc) (state.Update, error) {
		var step int // read as a plain field: the cases break state.Base's own checks on purpose
		_ = d.Get("current_step", &step)
		return upd(step), nil
	}).AddEdge(flow.START, "think").AddEdge("think", "think").WithRules(baserules.Rules()).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRules(t *testing.T) {
	typed, err := state.NewTyped[research]()
	if err != nil {
		t.Fatal(err)
	}
	note := func(int) state.Update { return state.Update{"notes": "n"} }
	tests := []struct {
		name      string
		input     state.Update
		upd       func(step int) state.Update
		limit     int // Options.RecursionLimit
		wantStop  state.StopReason
		wantSteps int
		wantCur   int
	}{
		{"max_steps stops and current_step counts", state.Update{"max_steps": 3}, note, 0, state.StopMaxSteps, 3, 3},
		{"max_steps lifts the default step limit", state.Update{"max_steps": 40}, note, 0, state.StopMaxSteps, 40, 40},
		{"an explicit limit still holds", state.Update{"max_steps": 40}, note, 30, state.StopRecursionLimit, 30, 30},
		{"no max_steps: the default limit", state.Update{"current_step": 0}, note, 0, state.StopRecursionLimit, flow.DefaultRecursionLimit, flow.DefaultRecursionLimit},
		{"final_result stops", state.Update{"max_steps": 10}, func(step int) state.Update {
			if step == 1 {
				return state.Update{"final_result": "done"}
			}
			return note(step)
		}, 0, state.StopFinal, 2, 2},
		{"stop_reason stops with its reason", state.Update{"max_steps": 10}, func(step int) state.Update {
			if step == 2 {
				return state.Update{"stop_reason": "env_terminal"}
			}
			return note(step)
		}, 0, state.StopEnvTerminal, 3, 3},
		{"an unknown stop_reason is ignored", state.Update{"max_steps": 4}, func(int) state.Update {
			return state.Update{"stop_reason": "bored"}
		}, 0, state.StopMaxSteps, 4, 4},
		{"a node that sets current_step is not counted over", state.Update{"max_steps": 5}, func(step int) state.Update {
			return state.Update{"current_step": step + 2}
		}, 0, state.StopMaxSteps, 3, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := flow.NewRunner(loop(t, typed, tc.upd), inmem.Open(store.Options{}), flow.Options{RecursionLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Invoke(context.Background(), "t", tc.input)
			if err != nil || res.StopReason != tc.wantStop || res.Progress.Steps != tc.wantSteps {
				t.Fatalf("stop %q after %d steps, %v; want %q after %d", res.StopReason, res.Progress.Steps, err, tc.wantStop, tc.wantSteps)
			}
			var cur int
			if err := res.State.Get("current_step", &cur); err != nil || cur != tc.wantCur {
				t.Fatalf("current_step %d (%v), want %d", cur, err, tc.wantCur)
			}
		})
	}
}

// A run that ends by itself ends with success, whatever max_steps says.
func TestNothingScheduledIsSuccess(t *testing.T) {
	typed, err := state.NewTyped[research]()
	if err != nil {
		t.Fatal(err)
	}
	g, err := flow.NewGraph(typed.Schema()).AddNode("once", func(ctx context.Context, d state.Doc) (state.Update, error) {
		return state.Update{"notes": "n"}, nil
	}).Chain("once").WithRules(baserules.Rules()).Compile()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	res, err := r.Invoke(context.Background(), "t", state.Update{"max_steps": 1})
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("stop %q, %v; want success", res.StopReason, err)
	}
}
