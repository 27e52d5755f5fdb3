package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Approval is a person's answer to an interrupt, as a server or a UI sends
// it to Resume. Approve goes on. Edit, at a pause before a step
// (Options.InterruptBefore), applies Value (a state update, an object of
// fields) before the step runs; at a node's Interrupt the node receives
// the Approval as its answer and decides. Reject, at a pause before a
// step, stops the run: nothing more runs, the stop reason is
// cancelled_immediate, and Value (if set, a state update) is applied with
// the rejection (a pipeline marks itself FAILED so); at a node's Interrupt
// the node decides. Resume records the
// answer, with who gave it and when, in the metadata of the next
// checkpoint it commits (Meta.Extra["approval"]): the audit trail.
type Approval struct {
	Action string          `json:"action"`
	Value  json.RawMessage `json:"value,omitempty"`
	Reason string          `json:"reason,omitempty"`
	By     string          `json:"by,omitempty"`
	At     time.Time       `json:"at"`
}

// Approval actions.
const (
	ApprovalApprove = "approve"
	ApprovalEdit    = "edit"
	ApprovalReject  = "reject"
)

// ApprovalKey is the Meta.Extra key of the audit trail.
const ApprovalKey = "approval"

// Check validates an approval: a known action, and an edit's value an
// object.
func (a Approval) Check() error {
	switch a.Action {
	case ApprovalApprove:
	case ApprovalReject:
		if len(a.Value) == 0 {
			return nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(a.Value, &m); err != nil {
			return fmt.Errorf("%w: a rejection's value is an object of state fields: %v", store.ErrInvalidArgument, err)
		}
	case ApprovalEdit:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(a.Value, &m); err != nil {
			return fmt.Errorf("%w: an edit's value is an object of state fields: %v", store.ErrInvalidArgument, err)
		}
	default:
		return fmt.Errorf("%w: approval action %q (approve, edit, reject)", store.ErrInvalidArgument, a.Action)
	}
	return nil
}

func approvalOf(v any) (Approval, bool) {
	switch a := v.(type) {
	case Approval:
		return a, true
	case *Approval:
		if a != nil {
			return *a, true
		}
	}
	return Approval{}, false
}

// pausedBefore reports whether an interrupted checkpoint is a pause before
// a step (Options.InterruptBefore), not a node's Interrupt.
func pausedBefore(head store.Checkpoint) bool {
	var p struct {
		Before string `json:"before"`
	}
	return json.Unmarshal(head.Meta.Interrupt, &p) == nil && p.Before != ""
}

// approve applies an approval to a resumed run stopped at an interrupt:
// a rejection ends it (done), an edit before a step commits the edited
// state first. Either way the answer is recorded with the next commit.
func (r *Runner) approve(ctx context.Context, run *run, head store.Checkpoint, a Approval) (done bool, res Result, err error) {
	if err := a.Check(); err != nil {
		return true, Result{}, err
	}
	if a.At.IsZero() {
		a.At = r.opts.Now().UTC()
	}
	run.approval = &a
	before := pausedBefore(head)
	switch {
	case a.Action == ApprovalReject && before:
		doc, patch, err := r.approvalUpdate(run, a)
		if err != nil {
			return true, Result{}, err
		}
		cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Patch: patch, State: doc,
			Meta: r.meta(run, store.Meta{Source: "approval", StopReason: string(state.StopCancelledImmediate), Next: []string{}})}
		if err := run.commit(ctx, cp); err != nil {
			return true, Result{}, err
		}
		run.doc, run.tasks = doc, nil
		res, err := run.finish(ctx, state.StopCancelledImmediate, nil, nil)
		return true, res, err
	case a.Action == ApprovalEdit && before:
		doc, patch, err := r.approvalUpdate(run, a)
		if err != nil {
			return true, Result{}, err
		}
		cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Patch: patch, State: doc, Meta: r.meta(run, store.Meta{Source: "approval"})}
		if err := run.commit(ctx, cp); err != nil {
			return true, Result{}, err
		}
		run.doc, run.readSeq = doc, run.head
	}
	return false, Result{}, nil
}

// approvalUpdate applies an approval's value (if any) to the run's state,
// redacted first when the runner redacts (as a node's update is).
func (r *Runner) approvalUpdate(run *run, a Approval) (state.Doc, state.Patch, error) {
	if len(a.Value) == 0 {
		return run.doc, nil, nil
	}
	val := a.Value
	if r.opts.Redact != nil {
		val = r.opts.Redact.JSON(val)
	}
	var upd map[string]json.RawMessage
	_ = json.Unmarshal(val, &upd) // Check made sure it is an object
	doc, patch, err := r.g.schema.ApplyJSON(run.doc, upd, state.ApplyOptions{NewID: idGen(keyPrefix(run.thread, r.opts.Namespace, run.head+1) + "approval")})
	if err != nil {
		return run.doc, nil, fmt.Errorf("%w: the approval's value: %w", store.ErrInvalidArgument, err)
	}
	return doc, patch, nil
}
