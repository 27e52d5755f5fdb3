package runs

import (
	"context"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// recordLimit records a run stopped at its recursion limit as LangGraph
// leaves such a thread, in error: a FAILED checkpoint after the head with
// the head's state and schedule, which a later run (with a higher limit)
// or a retry resumes as it resumes a failed step. Where it cannot be
// written the run's error stands alone.
func (m *runManager) recordLimit(ctx context.Context, lr *Run, msg string) {
	head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread})
	if err != nil || head.Status == store.StatusFailed || (len(head.Meta.Next) == 0 && len(head.Meta.Tasks) == 0) {
		return
	}
	meta := store.Meta{Source: "step", Error: msg, StepOf: head.Seq, Next: head.Meta.Next, Tasks: head.Meta.Tasks, RunID: lr.rec.ID,
		StopReason: string(state.StopRecursionLimit), Usage: head.Meta.Usage}
	flow.MarkRunStart(&meta) // a run from here is a new one: its limit counts from here
	if _, err := m.s.store.Append(ctx, store.Checkpoint{Thread: head.Thread, Parent: head.Seq, State: head.State, Status: store.StatusFailed, Meta: meta}); err != nil {
		m.s.log.Warn("recording a run's recursion limit failed", "run", lr.rec.ID, "err", err)
	}
}

// resumedFrom sends, in the checkpoints and debug modes, the checkpoint a
// run goes on from before what it commits, as LangGraph's streams of a
// resumed run begin.
func (m *runManager) resumedFrom(ctx context.Context, lr *Run, conv *converter) {
	if !conv.modes["checkpoints"] && !conv.modes["debug"] {
		return
	}
	th, err := m.s.store.Thread(ctx, lr.rec.Thread)
	if err != nil || th.Head == 0 {
		return
	}
	for _, e := range conv.checkpoint(ctx, flow.Event{Kind: flow.EventCheckpoint, Thread: th.ID, Seq: th.Head, Committed: true, Time: m.s.cfg.Now()}) {
		lr.log.append(e)
	}
}
