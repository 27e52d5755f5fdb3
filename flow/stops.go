package flow

import (
	"context"
	"slices"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Stops on record. A run that stops where its state does not say so — a
// budget (budget_steps, budget_time, budget_tokens), the state's step
// limit (max_steps, Rules.Stop), an Options.StopWhen criterion — ends with
// a checkpoint of its own (Meta.Source "stop"): no node ran, its patch
// writes the reason where the state keeps it (Rules.RecordStop: state.Base's
// stop_reason), Meta.StopReason names it, and its status is PARTIAL for a
// limit (work was left: Meta.Next keeps it) and SUCCESS otherwise. The stop
// is a fact of that run. What goes on from that checkpoint — a Resume
// (with a larger budget), an UpdateState, a fork — is a new run that takes
// the stop back: the first checkpoint it writes clears stop_reason with its
// own change. A Resume that stops again at once for the same reason writes
// nothing; the budget still counts from the run's start (see Budget).
// Stops the state says already (a final_result, a stop_reason a node
// wrote), nothing left to run, interrupts, failures and the recursion
// limit write no such checkpoint.

// SourceStop is the Meta.Source of the checkpoints that record a stop.
const SourceStop = "stop"

// stop ends the run for reason, recording it first when the state does
// not say it (own: the runner decided it).
func (r *Runner) stop(ctx context.Context, run *run, reason state.StopReason, own bool) (Result, error) {
	if run.recorded != "" {
		// A Resume from a recorded stop that stops before any step: the
		// state stays as recorded; the same stop is not recorded twice.
		same := reason == run.recorded
		run.doc, run.carry, run.recorded = run.recordedDoc, nil, ""
		if same {
			return run.finish(ctx, reason, nil, nil)
		}
	}
	if reason == state.StopSuccess || reason == state.StopRecursionLimit {
		return run.finish(ctx, reason, nil, nil)
	}
	ops := r.recordOps(run.doc, reason)
	if len(ops) == 0 && !own {
		return run.finish(ctx, reason, nil, nil)
	}
	doc, err := run.doc.Apply(ops)
	if err != nil {
		return run.finish(ctx, state.StopUnrecoverableError, nil, err)
	}
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Status: stopStatus(reason), Patch: ops, State: doc,
		Meta: r.meta(run, store.Meta{Source: SourceStop, StopReason: string(reason)})}
	if err := run.commit(ctx, cp); err != nil {
		return run.finish(ctx, state.StopUnrecoverableError, nil, err)
	}
	run.doc = doc
	return run.finish(ctx, reason, nil, nil)
}

// recordOps are the rules' operations that write reason into doc ("": that
// take a recorded stop back).
func (r *Runner) recordOps(doc state.Doc, reason state.StopReason) state.Patch {
	var ops state.Patch
	for _, rs := range r.rules() {
		if rs.RecordStop != nil {
			ops = append(ops, rs.RecordStop(doc, reason)...)
		}
	}
	return ops
}

// stopStatus is the status of the checkpoint that records a stop: PARTIAL
// for a limit the run reached with work left, SUCCESS for a stop chosen.
func stopStatus(reason state.StopReason) store.Status {
	switch reason {
	case state.StopBudgetSteps, state.StopBudgetTime, state.StopBudgetTokens, state.StopMaxSteps:
		return store.StatusPartial
	}
	return store.StatusSuccess
}

// takeBack returns the operations that take back the stop cp records, for
// what goes on from it (nil: cp records none).
func (r *Runner) takeBack(cp store.Checkpoint) state.Patch {
	if cp.Meta.Source != SourceStop {
		return nil
	}
	return r.recordOps(cp.State, "")
}

// applyFrom applies upd to the state of cp as an outside update does
// (UpdateState, UpdateStateAt): after taking back the stop cp records, if
// any, in the same patch.
func (r *Runner) applyFrom(cp store.Checkpoint, upd state.Update, opts state.ApplyOptions) (state.Doc, state.Patch, error) {
	back := r.takeBack(cp)
	doc := cp.State
	if len(back) > 0 {
		var err error
		if doc, err = doc.Apply(back); err != nil {
			return state.Doc{}, nil, err
		}
	}
	doc, patch, err := r.apply(doc, upd, opts)
	if err != nil || len(back) == 0 {
		return doc, patch, err
	}
	return doc, append(back, patch...), nil
}

// resumeStopped prepares a Resume from a checkpoint that records a stop:
// the run's state has it taken back, the operations that do so go with
// the first checkpoint the run writes (run.commit).
func (r *Runner) resumeStopped(run *run, head store.Checkpoint) error {
	if head.Meta.Source != SourceStop {
		return nil
	}
	ops := r.takeBack(head)
	doc, err := head.State.Apply(ops)
	if err != nil {
		return err
	}
	run.recorded, run.recordedDoc = state.StopReason(head.Meta.StopReason), head.State
	run.doc, run.carry = doc, ops
	return nil
}

// withCarry puts the operations that take back a recorded stop in front
// of the first checkpoint a resumed run writes.
func (run *run) withCarry(cp *store.Checkpoint) {
	if run.recorded == "" {
		return
	}
	if len(run.carry) > 0 {
		cp.Patch = append(slices.Clone(run.carry), cp.Patch...)
	}
	run.carry, run.recorded, run.recordedDoc = nil, "", state.Doc{}
}
