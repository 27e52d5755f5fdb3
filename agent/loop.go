package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// LoopAgent is QitOS's decide/act/reduce agent over typed state S (which
// should embed state.Base). Each iteration — prepare, decide, act, reduce —
// is one committed step; the runner counts current_step, enforces budgets
// and max_steps, and stops when final_result is set.
type LoopAgent[S any] struct {
	Name  string
	Typed *state.Typed[S]
	Tools []Tool
	// InitState builds the first state from the task (required).
	InitState func(ctx context.Context, task Task) (S, error)
	// Prepare turns the state into an observation for Decide (optional).
	Prepare func(ctx context.Context, s S) (string, error)
	// Decide chooses what to do (required).
	Decide func(ctx context.Context, s S, observation string) (Decision, error)
	// Act runs one action (optional; by default the tool of that name).
	Act func(ctx context.Context, s S, a Action, tc ToolContext) ActionResult
	// Reduce folds the decision and action results into an update
	// (required).
	Reduce func(ctx context.Context, s S, observation string, d Decision, results []ActionResult) (state.Update, error)
	// ShouldStop is checked before each step (optional).
	ShouldStop func(s S) (state.StopReason, bool)
	// Select picks among branch candidates (default: the first).
	Select func(ctx context.Context, s S, candidates []Decision) (Decision, error)
}

// TaskResult is how a task ended.
type TaskResult[S any] struct {
	TaskID      string
	Thread      string
	Success     bool // a final answer was given
	StopReason  state.StopReason
	FinalResult *string
	Steps       int
	Tokens      store.Tokens
	Issues      []TaskIssue
	State       S
	Head        int64
}

// Graph compiles the agent into a flow graph of one looping node.
func (a *LoopAgent[S]) Graph() (*flow.Compiled, error) {
	if a.Typed == nil || a.InitState == nil || a.Decide == nil || a.Reduce == nil {
		return nil, fmt.Errorf("%w: loop agent %q needs Typed, InitState, Decide and Reduce", flow.ErrInvalidGraph, a.Name)
	}
	return flow.NewGraph(a.Typed.Schema()).
		AddNode("step", a.step).
		AddEdge(flow.START, "step").
		AddEdge("step", "step").
		Compile()
}

func (a *LoopAgent[S]) step(ctx context.Context, d state.Doc) (state.Update, error) {
	s, err := a.Typed.Decode(d)
	if err != nil {
		return nil, err
	}
	obs := ""
	if a.Prepare != nil {
		if obs, err = a.Prepare(ctx, s); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	dec, err := a.Decide(ctx, s, obs)
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	if err := dec.Validate(); err != nil {
		return nil, err
	}
	chosen := dec
	if dec.Mode == ModeBranch {
		if a.Select != nil {
			chosen, err = a.Select(ctx, s, dec.Candidates)
		} else {
			chosen = dec.Candidates[0]
		}
		if err != nil {
			return nil, fmt.Errorf("select: %w", err)
		}
		if err := chosen.Validate(); err != nil {
			return nil, err
		}
	}
	info, _ := flow.Info(ctx)
	kv := state.NewKV(d)
	tc := ToolContext{KV: kv, State: d, Key: info.Key}
	var results []ActionResult
	upd := state.Update{}
	switch chosen.Mode {
	case ModeAct:
		tools := map[string]Tool{}
		for _, t := range a.Tools {
			tools[t.Name] = t
		}
		for i, act := range chosen.Actions {
			atc := tc
			atc.Key = fmt.Sprintf("%s/%d", tc.Key, i)
			if a.Act != nil {
				results = append(results, a.Act(ctx, s, act, atc))
			} else {
				results = append(results, runAction(ctx, tools, act, atc))
			}
		}
	case ModeFinal:
		upd["final_result"] = chosen.Answer
	case ModeWait:
		var answer json.RawMessage
		if err := flow.Interrupt(ctx, map[string]string{"wait_for": chosen.WaitFor}, &answer); err != nil {
			return nil, err
		}
		results = append(results, ActionResult{Name: "wait", Status: ActionSuccess, Output: answer, Attempts: 1})
	case ModeHandoff:
		upd["stop_reason"] = state.StopAgentCondition
	}
	red, err := a.Reduce(ctx, s, obs, chosen, results)
	if err != nil {
		return nil, fmt.Errorf("reduce: %w", err)
	}
	for k, v := range red {
		upd[k] = v
	}
	meta := map[string]any{"last_decision": dec}
	if results != nil {
		meta["last_actions"] = results
	}
	if chosen.Mode == ModeHandoff {
		meta["handoff_to"] = chosen.Target
	}
	upd["metadata"] = meta
	if kvu := kv.Update(); kvu != nil {
		upd[state.KVField] = kvu[state.KVField]
	}
	return upd, nil
}

// Run checks the task, builds the first state and runs the loop on a new
// thread. A task that fails pre-flight stops with task_validation_failed
// after zero steps, its issues in the state's metadata and the result.
func (a *LoopAgent[S]) Run(ctx context.Context, s store.Store, thread string, task Task, opts flow.Options) (TaskResult[S], error) {
	g, err := a.Graph()
	if err != nil {
		return TaskResult[S]{}, err
	}
	if a.ShouldStop != nil {
		opts.StopWhen = append(opts.StopWhen, func(d state.Doc, _ flow.Progress) (state.StopReason, bool) {
			st, err := a.Typed.Decode(d)
			if err != nil {
				return "", false
			}
			return a.ShouldStop(st)
		})
	}
	r, err := flow.NewRunner(g, s, opts)
	if err != nil {
		return TaskResult[S]{}, err
	}
	meta := map[string]any{"task_id": task.ID}
	for k, v := range task.Metadata {
		meta[k] = v
	}
	var input state.Update
	issues := task.Preflight()
	if len(issues) > 0 {
		meta["task_issues"] = issues
		input = state.Update{"task": task.Objective, "max_steps": max(task.Budget.MaxSteps, 1), "current_step": 0,
			"schema_version": 1, "stop_reason": state.StopTaskValidationFailed, "metadata": meta}
	} else {
		first, err := a.InitState(ctx, task)
		if err != nil {
			return TaskResult[S]{}, fmt.Errorf("init_state: %w", err)
		}
		doc, err := a.Typed.Encode(first)
		if err != nil {
			return TaskResult[S]{}, fmt.Errorf("init_state: %w", err)
		}
		input = state.Update{}
		for _, f := range doc.Fields() {
			raw, _ := doc.Raw(f)
			input[f] = raw
		}
		input["metadata"] = meta
	}
	res, err := r.Invoke(ctx, thread, input, flow.RunOptions{Budget: task.Budget.flow()})
	out := a.result(task.ID, res, issues)
	return out, err
}

// Resume continues a task after a crash, a failure or a wait.
func (a *LoopAgent[S]) Resume(ctx context.Context, s store.Store, thread string, task Task, value any, opts flow.Options) (TaskResult[S], error) {
	g, err := a.Graph()
	if err != nil {
		return TaskResult[S]{}, err
	}
	r, err := flow.NewRunner(g, s, opts)
	if err != nil {
		return TaskResult[S]{}, err
	}
	res, err := r.Resume(ctx, thread, value, flow.RunOptions{Budget: task.Budget.flow()})
	return a.result(task.ID, res, nil), err
}

func (a *LoopAgent[S]) result(taskID string, res flow.Result, issues []TaskIssue) TaskResult[S] {
	out := TaskResult[S]{TaskID: taskID, Thread: res.Thread, StopReason: res.StopReason, Steps: res.Progress.Steps,
		Tokens: res.Progress.Tokens, Issues: issues, Head: res.Head}
	if res.State.Len() > 0 {
		if st, err := a.Typed.Decode(res.State); err == nil || errors.Is(err, state.ErrInvalidState) {
			out.State = st
		}
		if b, err := stateBase(res.State); err == nil {
			out.FinalResult = b.FinalResult
		}
	}
	out.Success = out.FinalResult != nil && (res.StopReason == state.StopFinal || res.StopReason == state.StopSuccess)
	return out
}
