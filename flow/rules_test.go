package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// turnRules are rules of a made-up kind of state: "turns" counts steps,
// "limit" bounds them, "done" stops the run.
func turnRules() flow.Rules {
	num := func(d state.Doc, f string) int {
		var n int
		_ = d.Get(f, &n)
		return n
	}
	return flow.Rules{
		Stop: func(d state.Doc, p flow.Progress) (state.StopReason, bool) {
			if raw, ok := d.Raw("done"); ok && string(raw) == "true" {
				return state.StopAgentCondition, true
			}
			if l := num(d, "limit"); l > 0 && p.Scheduled > 0 && num(d, "turns") >= l {
				return state.StopMaxSteps, true
			}
			return "", false
		},
		AfterStep: func(d state.Doc, _ state.Patch) state.Patch {
			v, _ := json.Marshal(num(d, "turns") + 1)
			return state.Patch{{Op: state.OpReplace, Path: "/turns", Value: v}}
		},
		Bounded: func(d state.Doc) bool { return num(d, "limit") > 0 },
	}
}

func TestRules(t *testing.T) {
	noop := func(ctx context.Context, d state.Doc) (state.Update, error) { return state.Update{"x": 1}, nil }
	doneAt := func(n int) flow.NodeFunc {
		return func(ctx context.Context, d state.Doc) (state.Update, error) {
			var turns int
			_ = d.Get("turns", &turns)
			return state.Update{"done": turns+1 >= n}, nil
		}
	}
	tests := []struct {
		name      string
		node      flow.NodeFunc
		onGraph   bool // the graph carries the rules, else the options
		input     state.Update
		wantStop  state.StopReason
		wantTurns int
	}{
		{"a rule stops the run", doneAt(3), true, state.Update{"turns": 0}, state.StopAgentCondition, 3},
		{"from the options too", doneAt(2), false, state.Update{"turns": 0}, state.StopAgentCondition, 2},
		{"a bounded state lifts the default limit", noop, true, state.Update{"turns": 0, "limit": 30}, state.StopMaxSteps, 30},
		{"an unbounded state keeps it", noop, true, state.Update{"turns": 0}, state.StopRecursionLimit, flow.DefaultRecursionLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := flow.NewGraph(state.MustSchema()).AddNode("n", tc.node).AddEdge(flow.START, "n").AddEdge("n", "n")
			var opts flow.Options
			if tc.onGraph {
				g.WithRules(turnRules())
			} else {
				opts.Rules = []flow.Rules{turnRules()}
			}
			var patches []string
			opts.Observer = func(e flow.Event) {
				if e.Kind == flow.EventStepEnd {
					patches = append(patches, string(e.Payload))
				}
			}
			r := newRunner(t, g, inmem.Open(store.Options{}), opts)
			res, err := r.Invoke(context.Background(), "t", tc.input)
			if err != nil || res.StopReason != tc.wantStop {
				t.Fatalf("stop %q, %v; want %q", res.StopReason, err, tc.wantStop)
			}
			var turns int
			if err := res.State.Get("turns", &turns); err != nil || turns != tc.wantTurns {
				t.Fatalf("turns %d (%v), want %d", turns, err, tc.wantTurns)
			}
			// The rule's operation is committed with the step's patch.
			if len(patches) == 0 || !json.Valid([]byte(patches[0])) || !strings.Contains(patches[0], `"/turns"`) {
				t.Fatalf("step patches %q lack the rule's operation", patches)
			}
		})
	}
}

// An AfterStep operation that cannot apply fails the step, changing
// nothing.
func TestRuleOperationFails(t *testing.T) {
	bad := flow.Rules{AfterStep: func(state.Doc, state.Patch) state.Patch {
		return state.Patch{{Op: state.OpRemove, Path: "/missing"}}
	}}
	g := flow.NewGraph(state.MustSchema()).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
		return state.Update{"x": 1}, nil
	}).AddEdge(flow.START, "n").AddEdge("n", flow.END).WithRules(bad)
	st := inmem.Open(store.Options{})
	r := newRunner(t, g, st, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", state.Update{"x": 0})
	if err == nil || res.StopReason != state.StopUnrecoverableError {
		t.Fatalf("stop %q, %v; want a failed step", res.StopReason, err)
	}
	head, lerr := st.Load(context.Background(), store.LoadRequest{Thread: "t"})
	if lerr != nil || head.Status != store.StatusFailed {
		t.Fatalf("head %+v, %v; want FAILED", head, lerr)
	}
	var x int
	if err := head.State.Get("x", &x); err != nil || x != 0 {
		t.Fatalf("x = %d (%v) after a failed step, want 0", x, err)
	}
	var ne *flow.NodeError
	if errors.As(err, &ne) {
		t.Fatalf("a rule's failure is not a node's: %v", err)
	}
}
