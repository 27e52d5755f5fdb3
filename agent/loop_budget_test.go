package agent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// budgetCase is a loop agent that would run for ever, stopped by one
// kind of budget, and how to raise that budget.
type budgetCase struct {
	kind state.StopReason
	// setup limits the agent or its task.
	setup func(a *agent.LoopAgent[ResearchState], task *agent.Task)
	// raise raises the budget before the resume that goes on.
	raise func(t *testing.T, ctx context.Context, a *agent.LoopAgent[ResearchState], st store.Store, thread string, task *agent.Task)
	// steps is how many steps stop on the budget (0: not fixed, a time budget).
	steps, raised int
}

// budgetCases are the four budget kinds of QitOS.
func budgetCases() []budgetCase {
	return []budgetCase{
		{kind: state.StopBudgetSteps, steps: 2, raised: 4,
			setup: func(_ *agent.LoopAgent[ResearchState], task *agent.Task) { task.Budget.MaxSteps = 2 },
			raise: func(_ *testing.T, _ context.Context, _ *agent.LoopAgent[ResearchState], _ store.Store, _ string, task *agent.Task) {
				task.Budget.MaxSteps = 4
			}},
		{kind: state.StopBudgetTokens, steps: 3, raised: 5,
			setup: func(a *agent.LoopAgent[ResearchState], task *agent.Task) {
				task.Budget.MaxTokens = 25 // 10 a step: stops after 3
				decide := a.Decide
				a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
					flow.AddTokens(ctx, 7, 3)
					return decide(ctx, s, obs)
				}
			},
			raise: func(_ *testing.T, _ context.Context, _ *agent.LoopAgent[ResearchState], _ store.Store, _ string, task *agent.Task) {
				task.Budget.MaxTokens = 45
			}},
		{kind: state.StopBudgetTime,
			setup: func(a *agent.LoopAgent[ResearchState], task *agent.Task) {
				task.Budget.MaxRuntimeSeconds = 0.06
				decide := a.Decide
				a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
					time.Sleep(25 * time.Millisecond)
					return decide(ctx, s, obs)
				}
			},
			raise: func(_ *testing.T, _ context.Context, _ *agent.LoopAgent[ResearchState], _ store.Store, _ string, task *agent.Task) {
				task.Budget.MaxRuntimeSeconds = 0.2
			}},
		{kind: state.StopMaxSteps, steps: 3, raised: 5,
			setup: func(a *agent.LoopAgent[ResearchState], _ *agent.Task) {
				a.InitState = func(ctx context.Context, task agent.Task) (ResearchState, error) {
					return ResearchState{Base: state.NewBase(task.Objective, 3)}, nil
				}
			},
			// max_steps is the state's: an update raises it.
			raise: func(t *testing.T, ctx context.Context, a *agent.LoopAgent[ResearchState], st store.Store, thread string, _ *agent.Task) {
				g, err := a.Graph()
				if err != nil {
					t.Fatal(err)
				}
				r, err := flow.NewRunner(g, st, flow.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.UpdateState(ctx, thread, state.Update{"max_steps": 5}, "step"); err != nil {
					t.Fatal(err)
				}
			}},
	}
}

// endless makes the researcher read sources for ever (it never answers).
func endless(a *agent.LoopAgent[ResearchState]) {
	a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
		return agent.Act("more", agent.Action{Name: "read_source", Args: json.RawMessage(`{"source":"x"}`)})
	}
}

// TestLoopAgentBudgetStopOnRecord: a run stopped by a budget (steps,
// time, tokens) or by max_steps says so in its state's stop_reason (QitOS:
// "set by … the Engine on budget exhaustion"; final_result stays unset),
// in a PARTIAL checkpoint naming the stop, and in the trace manifest
// (status "stopped"), live and exported alike. Resuming with the same
// budget stops at once and writes nothing; after raising it the run goes
// on, its first checkpoint clearing stop_reason, and stops again on record.
func TestLoopAgentBudgetStopOnRecord(t *testing.T) {
	for _, tc := range budgetCases() {
		t.Run(string(tc.kind), func(t *testing.T) {
			ctx := context.Background()
			st := inmem.Open(store.Options{})
			a := researcher(t)
			endless(a)
			task := agent.Task{ID: "b", Objective: "read"}
			tc.setup(a, &task)
			res, head := runTraced(t, ctx, a, st, task, nil)
			checkStopped(t, res, head, tc.kind)
			if tc.steps > 0 && res.Steps != tc.steps {
				t.Fatalf("stopped after %d steps, want %d", res.Steps, tc.steps)
			}
			// The same budget: stopped at once, nothing written.
			again, err := a.Resume(ctx, st, "b", task, nil, flow.Options{})
			if err != nil || again.StopReason != tc.kind || again.Head != head.Seq || again.State.StopReason == nil || *again.State.StopReason != tc.kind {
				t.Fatalf("resume with the same budget: %+v %v, want %s at head %d", again, err, tc.kind, head.Seq)
			}
			tc.raise(t, ctx, a, st, "b", &task)
			more, head2 := runTraced(t, ctx, a, st, task, &head)
			checkStopped(t, more, head2, tc.kind)
			if head2.Seq <= head.Seq+1 || (tc.raised > 0 && more.State.CurrentStep != tc.raised) {
				t.Fatalf("after raising the budget: head %d (was %d), at step %d, want step %d", head2.Seq, head.Seq, more.State.CurrentStep, tc.raised)
			}
			next, err := st.Load(ctx, store.LoadRequest{Thread: "b", Seq: head.Seq + 1})
			if err != nil {
				t.Fatal(err)
			}
			if raw, _ := next.State.Raw("stop_reason"); string(raw) != "null" {
				t.Fatalf("checkpoint %d after the recorded stop has stop_reason %s, want it cleared", next.Seq, raw)
			}
		})
	}
}

// runTraced runs (from nil) or resumes (from the recorded stop) thread "b"
// with a live trace, checks that the trace equals the export and returns
// the result and the head.
func runTraced(t *testing.T, ctx context.Context, a *agent.LoopAgent[ResearchState], st store.Store, task agent.Task, from *store.Checkpoint) (agent.TaskResult[ResearchState], store.Checkpoint) {
	t.Helper()
	var res agent.TaskResult[ResearchState]
	lm, lb := tracedRun(t, ctx, st, "b", func(opts flow.Options) (err error) {
		if from == nil {
			res, err = a.Run(ctx, st, "b", task, opts)
		} else {
			res, err = a.Resume(ctx, st, "b", task, nil, opts)
		}
		return err
	})
	summary, _ := lm["summary"].(map[string]any)
	if lm["status"] != "stopped" || summary["stop_reason"] != string(res.StopReason) || summary["final_result"] != nil {
		t.Fatalf("manifest %s: want status stopped, stop_reason %s, final_result null", lb, res.StopReason)
	}
	head, err := st.Load(ctx, store.LoadRequest{Thread: "b"})
	if err != nil {
		t.Fatal(err)
	}
	return res, head
}

// checkStopped checks a run stopped on kind, on record.
func checkStopped(t *testing.T, res agent.TaskResult[ResearchState], head store.Checkpoint, kind state.StopReason) {
	t.Helper()
	if res.StopReason != kind || res.Success || res.FinalResult != nil || res.State.FinalResult != nil ||
		res.State.StopReason == nil || *res.State.StopReason != kind {
		t.Fatalf("result: stop %s, success %v, final %v, state stop_reason %v; want %s on record", res.StopReason, res.Success, res.FinalResult, res.State.StopReason, kind)
	}
	if head.Seq != res.Head || head.Status != store.StatusPartial || head.Meta.StopReason != string(kind) || len(head.Nodes) != 0 || len(head.Meta.Next) == 0 {
		t.Fatalf("head %d: %s, stop %q, nodes %v, next %v; want a PARTIAL %s checkpoint that keeps the next step", head.Seq, head.Status, head.Meta.StopReason, head.Nodes, head.Meta.Next, kind)
	}
	if raw, _ := head.State.Raw("stop_reason"); string(raw) != `"`+string(kind)+`"` {
		t.Fatalf("head state stop_reason %s", raw)
	}
}
