package flow

import (
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// StopCriterion is a stop rule, checked before every step: it returns the
// reason and true to stop the run there.
type StopCriterion func(s state.Doc, p Progress) (state.StopReason, bool)

// Progress is what stop criteria and results see of a run.
type Progress struct {
	Steps  int
	Tokens store.Tokens
	Start  time.Time
	// Scheduled is the number of tasks the next step would run (0: the
	// run has nothing left to do).
	Scheduled int
}

// Rules extend the runner with the rules of one kind of state, so that the
// runner itself knows no field names. The built-in fields of state.Base
// (stop_reason, final_result, max_steps, current_step) are one such kind:
// package flow/baserules supplies their rules. A graph carries its rules
// (Graph.WithRules), as do a runner's options (Options.Rules); the graph's
// come first.
type Rules struct {
	// Stop is checked before every step, ahead of the runner's own checks
	// (nothing scheduled, budgets, the step limit, Options.StopWhen): a
	// state that says it is done stops the run with its reason.
	Stop StopCriterion
	// AfterStep sees each step's merged state and patch before the commit
	// and returns operations to add to the step (a step counter); they are
	// applied, in order, after the nodes' updates and committed with them.
	AfterStep func(s state.Doc, patch state.Patch) state.Patch
	// Bounded reports whether the state bounds its runs itself (a step
	// limit of its own); the default step limit then does not apply. An
	// explicit limit (Options, RunOptions, Graph.WithRecursionLimit) still
	// does.
	Bounded func(s state.Doc) bool
	// RecordStop returns the operations that write a stop into the state
	// where the state keeps its own (state.Base's stop_reason): nil when
	// the state says so already (or has no place for it). The runner
	// records a stop the state does not say — a budget, a Stop rule's
	// limit, an Options.StopWhen criterion — in a checkpoint of its own
	// (see Runner.Resume). With reason "" it returns the operations that
	// take a recorded stop back, for what goes on from that checkpoint.
	RecordStop func(s state.Doc, reason state.StopReason) state.Patch
}

// rules returns the graph's rules, then the runner's.
func (r *Runner) rules() []Rules {
	if len(r.opts.Rules) == 0 {
		return r.g.rules
	}
	return append(append([]Rules(nil), r.g.rules...), r.opts.Rules...)
}

// shouldStop checks, before a step, whether the run stops there: the
// state's own rules, then nothing left to run, the budget, the step limit
// and the options' criteria, in that order. own says the runner decided
// the stop (a budget or a criterion), which it records even where the
// state has no place for it.
func (r *Runner) shouldStop(run *run) (reason state.StopReason, stop, own bool) {
	p := run.progress()
	for _, rs := range r.rules() {
		if rs.Stop == nil {
			continue
		}
		if reason, ok := rs.Stop(run.doc, p); ok {
			return reason, true, false
		}
	}
	if len(run.tasks) == 0 {
		return state.StopSuccess, true, false
	}
	if reason, ok := run.overBudget(p); ok {
		return reason, true, true
	}
	if run.limit > 0 && p.Steps >= run.limit && !(run.limitDefault && r.bounded(run.doc)) {
		return state.StopRecursionLimit, true, false
	}
	for _, c := range r.opts.StopWhen {
		if reason, ok := c(run.doc, p); ok {
			return reason, true, true
		}
	}
	return "", false, false
}

// overBudget checks the run's budget.
func (run *run) overBudget(p Progress) (state.StopReason, bool) {
	b := run.budget
	switch {
	case b.MaxSteps > 0 && p.Steps >= b.MaxSteps:
		return state.StopBudgetSteps, true
	case b.MaxRuntime > 0 && time.Duration(run.currentUsage().RuntimeMS-run.base.RuntimeMS)*time.Millisecond >= b.MaxRuntime:
		return state.StopBudgetTime, true
	case b.MaxTokens > 0 && p.Tokens.Input+p.Tokens.Output >= b.MaxTokens:
		return state.StopBudgetTokens, true
	}
	return "", false
}

// bounded reports whether a rule says the state bounds its run.
func (r *Runner) bounded(doc state.Doc) bool {
	for _, rs := range r.rules() {
		if rs.Bounded != nil && rs.Bounded(doc) {
			return true
		}
	}
	return false
}

// afterStep applies the rules' additions to a step's merged state and patch.
func (r *Runner) afterStep(doc state.Doc, patch state.Patch) (state.Doc, state.Patch, error) {
	for _, rs := range r.rules() {
		if rs.AfterStep == nil {
			continue
		}
		ops := rs.AfterStep(doc, patch)
		if len(ops) == 0 {
			continue
		}
		nd, err := doc.Apply(ops)
		if err != nil {
			return doc, patch, err
		}
		doc, patch = nd, append(patch, ops...)
	}
	return doc, patch, nil
}
