package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// LoopAgent is QitOS's decide/act/reduce agent over typed state S (which
// should embed state.Base). Each iteration — prepare, decide, act, reduce —
// is one committed step; its graph carries the rules of state.Base
// (flow/baserules): current_step is counted, max_steps and the budgets are
// enforced, and the run stops when final_result is set.
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
	// ShouldStop is checked before each step (optional), on Run and on
	// Resume alike.
	ShouldStop func(s S) (state.StopReason, bool)
	// Select picks among branch candidates (default: the first).
	Select func(ctx context.Context, s S, candidates []Decision) (Decision, error)
	// Critics judge each step after Reduce, seeing the state the step
	// produces (QitOS critics). The first output with action "stop" ends
	// the run with stop reason "critic_stop"; "retry" skips this step's
	// other stop checks and drops a final answer or stop reason the step
	// reached (the loop goes on); "continue" passes. Their outputs are recorded in
	// the step's trace row.
	Critics []Critic[S]
	// EnvTerminal reports, after Reduce, whether the environment reached a
	// terminal state (QitOS env.is_terminal): the run stops with stop
	// reason "env_terminal", which TaskResult counts as success.
	EnvTerminal func(ctx context.Context, s S, results []ActionResult) bool
	// Stagnation stops the run with stop reason "stagnation" after this
	// many consecutive steps that leave the state's signature unchanged
	// (0: off). The count is kept in the state's metadata
	// ("stagnant_steps"), so it holds across resumes.
	Stagnation int
	// Signature is what a step must change not to stagnate (default: the
	// state without current_step, metadata and metrics).
	Signature func(s S) any
}

// Critic judges a step (QitOS's Critic.evaluate): s is the state after
// the step's Reduce.
type Critic[S any] func(ctx context.Context, s S, d Decision, results []ActionResult) (CriticOutput, error)

// CriticOutput is a critic's verdict.
type CriticOutput struct {
	// Action is "continue" (default), "stop" or "retry".
	Action  string         `json:"action"`
	Reason  string         `json:"reason,omitempty"`
	Score   *float64       `json:"score,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// Critic actions.
const (
	CriticContinue = "continue"
	CriticStop     = "stop"
	CriticRetry    = "retry"
)

// StepRecord is what a loop-agent step records for its trace row (QitOS's
// StepRecord), in the checkpoint's metadata under StepRecordKey.
type StepRecord struct {
	Observation     any              `json:"observation"`
	Decision        *Decision        `json:"decision"`
	Actions         []Action         `json:"actions"`
	ActionResults   []any            `json:"action_results"`
	ToolInvocations []ToolInvocation `json:"tool_invocations"`
	CriticOutputs   []CriticOutput   `json:"critic_outputs"`
}

// StepRecordKey is the store.Meta.Extra member holding a StepRecord.
const StepRecordKey = "step_record"

// TaskRecordKey is the store.Meta.Extra member of a task's input
// checkpoint holding its TaskRecord.
const TaskRecordKey = "task"

// TaskRecord is what the trace manifest shows of a run's task (QitOS:
// Task.id is "used in trace artifacts", Task.metadata is "stored in the
// trace manifest"); Run records it on the run's input checkpoint.
type TaskRecord struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata"`
}

// ToolInvocation describes one action's tool call (QitOS's
// tool_invocations row).
type ToolInvocation struct {
	ToolName  string       `json:"tool_name"`
	Attempts  int          `json:"attempts"`
	LatencyMS float64      `json:"latency_ms"`
	Status    ActionStatus `json:"status"`
	Error     *string      `json:"error"`
}

// TaskResult is how a task ended.
type TaskResult[S any] struct {
	TaskID string
	Thread string
	// Success follows QitOS: the run stopped with success, final,
	// env_terminal or agent_condition.
	Success     bool
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
		WithRules(baserules.Rules()).
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
	rec := StepRecord{Observation: obs, Actions: []Action{}, ActionResults: []any{}, ToolInvocations: []ToolInvocation{}, CriticOutputs: []CriticOutput{}}
	dec, err := a.Decide(ctx, s, obs)
	if errors.Is(err, ErrContextOverflow) {
		// The model cannot take more context: the run stops here (QitOS
		// context_overflow), recorded as a step.
		flow.Annotate(ctx, StepRecordKey, rec)
		return state.Update{"stop_reason": state.StopContextOverflow, "metadata": map[string]any{"last_error": err.Error()}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	chosen, err := a.choose(ctx, s, dec)
	if err != nil {
		return nil, err
	}
	rec.Decision = &chosen
	info, _ := flow.Info(ctx)
	kv := state.NewKV(d)
	tc := ToolContext{KV: kv, State: d, Key: info.Key}
	results, upd, err := a.act(ctx, s, chosen, tc)
	if err != nil {
		return nil, err
	}
	red, err := a.Reduce(ctx, s, obs, chosen, results)
	if err != nil {
		return nil, fmt.Errorf("reduce: %w", err)
	}
	for k, v := range red {
		upd[k] = v
	}
	meta := map[string]any{}
	if rm, ok := red["metadata"].(map[string]any); ok {
		for k, v := range rm { // what Reduce adds to metadata is kept
			meta[k] = v
		}
	}
	meta["last_decision"] = dec
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
	rec.recordActions(chosen, results)
	if err := a.checkStop(ctx, d, s, chosen, results, upd, &rec); err != nil {
		return nil, err
	}
	flow.Annotate(ctx, StepRecordKey, rec)
	return upd, nil
}

// choose validates a decision and picks a branch candidate.
func (a *LoopAgent[S]) choose(ctx context.Context, s S, dec Decision) (Decision, error) {
	if err := dec.Validate(); err != nil {
		return Decision{}, err
	}
	if dec.Mode != ModeBranch {
		return dec, nil
	}
	chosen := dec.Candidates[0]
	if a.Select != nil {
		var err error
		if chosen, err = a.Select(ctx, s, dec.Candidates); err != nil {
			return Decision{}, fmt.Errorf("select: %w", err)
		}
	}
	if err := chosen.Validate(); err != nil {
		return Decision{}, err
	}
	return chosen, nil
}

// act carries out a decision: runs actions, or starts the update a final,
// wait or handoff decision implies.
func (a *LoopAgent[S]) act(ctx context.Context, s S, chosen Decision, tc ToolContext) ([]ActionResult, state.Update, error) {
	var results []ActionResult
	upd := state.Update{}
	switch chosen.Mode {
	case ModeAct:
		tools := map[string]Tool{}
		for _, t := range a.Tools {
			tools[t.Name] = t
		}
		for i, act := range chosen.Actions {
			atc := toolContext(tc, 0, i)
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
			return nil, nil, err
		}
		results = append(results, ActionResult{Name: "wait", Status: ActionSuccess, Output: answer, Attempts: 1})
	case ModeHandoff:
		upd["stop_reason"] = state.StopAgentCondition
	}
	return results, upd, nil
}

// recordActions fills the trace row's actions, results and tool
// invocations as QitOS writes them.
func (rec *StepRecord) recordActions(d Decision, results []ActionResult) {
	if d.Mode == ModeAct {
		rec.Actions = append(rec.Actions, d.Actions...)
	}
	for _, r := range results {
		var inv ToolInvocation
		inv.ToolName, inv.Attempts, inv.LatencyMS, inv.Status = r.Name, r.Attempts, r.LatencyMS, r.Status
		if r.Status == ActionSuccess {
			rec.ActionResults = append(rec.ActionResults, r.Output)
		} else {
			e := r.Error
			inv.Error = &e
			rec.ActionResults = append(rec.ActionResults, map[string]string{"error": r.Error})
		}
		rec.ToolInvocations = append(rec.ToolInvocations, inv)
	}
}

// checkStop runs the critics and the stop checks of QitOS's check_stop
// after reduce: critics, then (unless a stop is already set) the
// environment's terminal state, then stagnation. It sets stop_reason in
// upd and records the critics' outputs.
func (a *LoopAgent[S]) checkStop(ctx context.Context, d state.Doc, s S, chosen Decision, results []ActionResult, upd state.Update, rec *StepRecord) error {
	if len(a.Critics) == 0 && a.EnvTerminal == nil && a.Stagnation <= 0 {
		return nil
	}
	after, err := a.after(d, upd)
	if err != nil {
		return err
	}
	_, stopped := upd["stop_reason"]
	stopped = stopped || chosen.Mode == ModeFinal
	verdict := CriticContinue
	for i, c := range a.Critics {
		out, err := c(ctx, after, chosen, results)
		if err != nil {
			return fmt.Errorf("critic %d: %w", i, err)
		}
		if out.Action == "" {
			out.Action = CriticContinue
		}
		rec.CriticOutputs = append(rec.CriticOutputs, out)
		if verdict == CriticContinue && (out.Action == CriticStop || out.Action == CriticRetry) {
			verdict = out.Action
		}
	}
	switch {
	case verdict == CriticStop:
		if !stopped {
			upd["stop_reason"] = state.StopCriticStop
		}
		return nil
	case verdict == CriticRetry:
		// The critic rejects the step's conclusion: a final answer or stop
		// the step reached is not taken, the loop goes on.
		delete(upd, "final_result")
		delete(upd, "stop_reason")
		return nil
	case stopped:
		return nil
	}
	if a.EnvTerminal != nil && a.EnvTerminal(ctx, after, results) {
		upd["stop_reason"] = state.StopEnvTerminal
		return nil
	}
	if a.Stagnation > 0 {
		return a.stagnation(d, s, after, upd)
	}
	return nil
}

// after is the state the step's update produces.
func (a *LoopAgent[S]) after(d state.Doc, upd state.Update) (S, error) {
	var zero S
	nd, _, err := a.Typed.Schema().Apply(d, upd)
	if err != nil {
		return zero, fmt.Errorf("reduce: %w", err)
	}
	st, err := a.Typed.Decode(nd)
	if err != nil && !errors.Is(err, state.ErrInvalidState) {
		return zero, err
	}
	return st, nil
}

// stagnation counts consecutive steps that leave the signature unchanged.
func (a *LoopAgent[S]) stagnation(d state.Doc, before, after S, upd state.Update) error {
	sb, err := a.signature(before)
	if err != nil {
		return err
	}
	sa, err := a.signature(after)
	if err != nil {
		return err
	}
	var prev struct {
		Stagnant int `json:"stagnant_steps"`
	}
	if d.Has("metadata") {
		_ = d.Get("metadata", &prev) // absent or malformed: no count yet
	}
	n := 0
	if bytes.Equal(sb, sa) {
		n = prev.Stagnant + 1
	}
	upd["metadata"].(map[string]any)["stagnant_steps"] = n
	if n >= a.Stagnation {
		upd["stop_reason"] = state.StopStagnation
	}
	return nil
}

// signature encodes what a step must change not to stagnate.
func (a *LoopAgent[S]) signature(s S) ([]byte, error) {
	if a.Signature != nil {
		return json.Marshal(a.Signature(s))
	}
	doc, err := a.Typed.Encode(s)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc.String()), &m); err != nil {
		return nil, err
	}
	delete(m, "current_step")
	delete(m, "metadata")
	delete(m, "metrics")
	return json.Marshal(m) // map keys sort: the same state, the same bytes
}

// runner builds the agent's runner: the same hooks and criteria for Run
// and Resume.
func (a *LoopAgent[S]) runner(s store.Store, opts flow.Options) (*flow.Runner, error) {
	g, err := a.Graph()
	if err != nil {
		return nil, err
	}
	opts.StopWhen = slices.Clone(opts.StopWhen)
	if a.ShouldStop != nil {
		opts.StopWhen = append(opts.StopWhen, func(d state.Doc, _ flow.Progress) (state.StopReason, bool) {
			st, err := a.Typed.Decode(d)
			if err != nil && !errors.Is(err, state.ErrInvalidState) {
				return "", false
			}
			return a.ShouldStop(st)
		})
	}
	return flow.NewRunner(g, s, opts)
}

// runOptions turns the task's budget into run options. A step budget
// replaces the runner's default step limit (the budget is the limit), as
// does the state's max_steps (the runner sees it).
func runOptions(task Task, opts flow.Options) flow.RunOptions {
	ro := flow.RunOptions{Budget: task.Budget.flow()}
	if opts.RecursionLimit == 0 && (task.Budget.MaxSteps > 0 || opts.Budget.MaxSteps > 0) {
		ro.RecursionLimit = -1
	}
	return ro
}

// PreflightFailed is the final_result of a task refused before the loop
// (QitOS's wording).
const PreflightFailed = "Preflight validation failed."

// Run checks the task, builds the first state and runs the loop on a new
// thread. A task that fails pre-flight stops after zero steps with
// task_validation_failed (env_capability_mismatch when every issue is an
// ENV_ one) and final_result PreflightFailed, as QitOS does; its issues go
// into the state's metadata and the result.
func (a *LoopAgent[S]) Run(ctx context.Context, s store.Store, thread string, task Task, opts flow.Options) (TaskResult[S], error) {
	r, err := a.runner(s, opts)
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
			"schema_version": 1, "stop_reason": preflightStop(issues), "final_result": PreflightFailed, "metadata": meta}
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
	rec := TaskRecord{ID: task.ID, Metadata: task.Metadata}
	if rec.Metadata == nil {
		rec.Metadata = map[string]any{}
	}
	ro := runOptions(task, opts)
	ro.Extra = map[string]any{TaskRecordKey: rec}
	res, err := r.Invoke(ctx, thread, input, ro)
	out := a.result(task.ID, res, issues)
	return out, err
}

// preflightStop is the stop reason of failed pre-flight issues.
func preflightStop(issues []TaskIssue) state.StopReason {
	for _, is := range issues {
		if !strings.HasPrefix(is.Code, "ENV_") {
			return state.StopTaskValidationFailed
		}
	}
	return state.StopEnvCapabilityMismatch
}

// Resume continues a task after a crash, a failure or a wait, with every
// hook and criterion of Run.
func (a *LoopAgent[S]) Resume(ctx context.Context, s store.Store, thread string, task Task, value any, opts flow.Options) (TaskResult[S], error) {
	r, err := a.runner(s, opts)
	if err != nil {
		return TaskResult[S]{}, err
	}
	res, err := r.Resume(ctx, thread, value, runOptions(task, opts))
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
	switch res.StopReason {
	case state.StopSuccess, state.StopFinal, state.StopEnvTerminal, state.StopAgentCondition:
		out.Success = true
	}
	return out
}
