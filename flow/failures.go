package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// failures are a step's tasks that did not finish: the first interrupt,
// the errors and the nodes that failed.
type failures struct {
	interrupt *InterruptError
	errs      []error
	nodes     []string
}

func collectFailures(tasks []store.Task, results []taskResult) failures {
	var f failures
	for i, res := range results {
		var ie *InterruptError
		switch {
		case res.err == nil:
		case errors.As(res.err, &ie):
			if f.interrupt == nil {
				f.interrupt = ie
			}
		default:
			f.errs = append(f.errs, res.err)
			f.nodes = append(f.nodes, tasks[i].Node)
		}
	}
	return f
}

// settleFailures ends a step some of whose tasks failed or interrupted
// (done is false when all succeeded): a lost race commits nothing; else
// the finished siblings' updates are kept as pending writes and an
// INTERRUPTED or FAILED checkpoint is committed.
func (r *Runner) settleFailures(ctx context.Context, run *run, plan *stepPlan, results []taskResult) (out stepOutcome, done bool, err error) {
	f := collectFailures(plan.tasks, results)
	if conflict := firstConflict(f.errs); conflict != nil {
		out, err = r.abandonStep(ctx, run, conflict)
		return out, true, err
	}
	if f.interrupt == nil && len(f.errs) == 0 {
		return stepOutcome{}, false, nil
	}
	if err := run.settle(ctx, ""); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, true, err
	}
	if r.opts.Durability == DurabilityExit {
		// The accumulated steps are now one checkpoint: key the kept
		// writes by it, as a resume will.
		plan.readSeq = run.head
		plan.keys = taskKeys(run.thread, r.opts.Namespace, plan.readSeq, plan.tasks)
	}
	if err := r.keepWrites(ctx, run, plan, results); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, true, err
	}
	if f.interrupt != nil && len(f.errs) == 0 {
		out, err = r.commitInterrupt(ctx, run, plan, f.interrupt)
		return out, true, err
	}
	out, err = r.commitFailure(ctx, run, plan, f, results)
	return out, true, err
}

// abandonStep handles a nested runner that lost a race for its head:
// another writer owns this thread now, so nothing of this step is
// committed, not even as FAILED.
func (r *Runner) abandonStep(ctx context.Context, run *run, conflict error) (stepOutcome, error) {
	if err := run.settle(ctx, ""); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, errors.Join(conflict, err)
	}
	r.emit(Event{Kind: EventError, RunID: run.id, Thread: run.thread, Seq: run.head, Err: conflict.Error()})
	return stepOutcome{stop: state.StopUnrecoverableError}, conflict
}

// keepWrites stores the updates of the tasks that finished as pending
// writes, so a resume does not run them again.
func (r *Runner) keepWrites(ctx context.Context, run *run, plan *stepPlan, results []taskResult) error {
	var ws []store.Write
	for i, res := range results {
		if res.err != nil || res.pending {
			continue
		}
		b := res.raw
		if b == nil {
			var err error
			if b, err = json.Marshal(res.update); err != nil {
				return fmt.Errorf("flow: node %q update: %w", plan.tasks[i].Node, err)
			}
		}
		ws = append(ws, store.Write{Task: plan.keys[i], Node: plan.tasks[i].Node, Update: b})
	}
	if len(ws) == 0 {
		return nil
	}
	return r.s.PutWrites(ctx, run.thread, r.opts.Namespace, plan.readSeq, ws)
}

// commitInterrupt stops the run for a node's Interrupt: an INTERRUPTED
// checkpoint holding the payload, which a Resume answers.
func (r *Runner) commitInterrupt(ctx context.Context, run *run, plan *stepPlan, ie *InterruptError) (stepOutcome, error) {
	if r.opts.Redact != nil {
		ie.Payload = r.opts.Redact.JSON(ie.Payload)
	}
	fields := map[string]json.RawMessage{"node": mustJSON(ie.Node), "value": ie.Payload}
	if ie.ResponseSchema != nil {
		fields["response_schema"] = ie.ResponseSchema
	}
	payload, _ := json.Marshal(fields)
	if ie.Static {
		// A subgraph paused inside the node: the run is paused before it
		// (a resume runs it again, and the subgraph goes on), with no
		// value of its own.
		payload, _ = json.Marshal(map[string]json.RawMessage{"before": mustJSON(ie.Node), "node": mustJSON(ie.Node), "within": ie.Payload})
	}
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, State: run.doc, Status: store.StatusInterrupted, Nodes: []string{ie.Node},
		Meta: r.meta(run, store.Meta{Source: "interrupt", Interrupt: payload, StepOf: plan.readSeq, StopReason: string(state.StopInterrupt)})}
	if err := run.commit(ctx, cp); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, err
	}
	run.readSeq = plan.readSeq
	r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: ie.Node, Payload: ie.Payload, Static: ie.Static, ResponseSchema: ie.ResponseSchema})
	return stepOutcome{stop: state.StopInterrupt, interrupt: ie.Payload}, nil
}

// commitFailure commits a FAILED checkpoint for the step. A failed step
// ran: it counts against the run's budget.
func (r *Runner) commitFailure(ctx context.Context, run *run, plan *stepPlan, f failures, results []taskResult) (stepOutcome, error) {
	err := errors.Join(f.errs...)
	run.usage.Steps++
	for _, res := range results {
		run.usage.Tokens.Input += res.tokens.in
		run.usage.Tokens.Output += res.tokens.out
	}
	reason := failureReason(f.errs)
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, State: run.doc, Status: store.StatusFailed, Nodes: f.nodes,
		Meta: r.meta(run, store.Meta{Source: "step", Error: err.Error(), StepOf: plan.readSeq, StopReason: string(reason), Extra: annotations(results)})}
	if cerr := run.commit(context.WithoutCancel(ctx), cp); cerr != nil {
		err = errors.Join(err, cerr)
	}
	run.readSeq = plan.readSeq
	r.emit(Event{Kind: EventError, RunID: run.id, Thread: run.thread, Seq: run.head, Err: err.Error()})
	return stepOutcome{stop: reason}, err
}

// StopReasoner is an error that says why a run stops when a node fails
// with it (agent.ProviderError: "context_overflow" for a prompt over the
// model's context window). Other failures stop with unrecoverable_error.
type StopReasoner interface {
	error
	StopReason() state.StopReason
}

// failureReason is the stop reason of a step whose tasks failed: the first
// valid reason a failure names, else unrecoverable_error.
func failureReason(failed []error) state.StopReason {
	for _, err := range failed {
		var sr StopReasoner
		if errors.As(err, &sr) && sr.StopReason().Valid() {
			return sr.StopReason()
		}
	}
	return state.StopUnrecoverableError
}

// firstConflict returns the first node error that is a store conflict.
func firstConflict(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // strings always marshal
	return b
}
