package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// enqueue records a run and queues it for workers (Config.Queue). A second
// run on a busy thread is refused (reject), waits its turn (enqueue:
// workers take a thread's runs oldest first, one at a time), or cancels
// the thread's unfinished runs first (interrupt, rollback: their workers
// stop them before their next commit, and a rolled back run's worker
// returns the thread to where that run began before it lets the thread
// go).
func (s *Service) enqueue(ctx context.Context, lr *Run) error {
	switch lr.data.MultitaskStrategy {
	case "interrupt", "rollback":
		recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: lr.rec.Thread, Status: []string{StatusPending, StatusRunning}})
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if err := s.cancelQueued(ctx, rec, lr.data.MultitaskStrategy); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	case "reject":
		busy, err := s.queuedBusy(ctx, lr.rec.Thread)
		if err != nil {
			return err
		}
		if busy {
			return newError(ErrBusy, "thread %q is busy with a queued run (multitask_strategy reject); wait for it, or ask for enqueue, interrupt or rollback", APIThreadID(lr.rec.Thread))
		}
	}
	lr.rec.Data = raw(lr.data)
	return s.queue.EnqueueRun(ctx, lr.rec, lr.data.Graph())
}

// ErrCancelled, as the cause of the context Execute runs under (a worker
// translates its queue's remote cancellation to it), interrupts the run:
// it ends with status interrupted rather than being left running.
var ErrCancelled = errors.New("runs: run cancelled")

// ErrRolledBack, as that cause, cancels the run and returns its thread to
// where the run began (a rollback); it wraps ErrCancelled.
var ErrRolledBack = fmt.Errorf("%w and rolled back", ErrCancelled)

// cancelQueued cancels a run this process queued (Config.Queue) with action
// interrupt or rollback: a run no worker has ends at once (interrupted,
// or, rolled back, deleted with what it committed undone); a running one
// is stopped by its worker before its next commit, and rolled back by it.
func (s *Service) cancelQueued(ctx context.Context, rec store.RunRecord, action string) error {
	started, err := s.queue.CancelQueuedRun(ctx, rec.ID, action)
	if err != nil || started {
		return err
	}
	if held, err := s.heldElsewhere(ctx, rec); err != nil || held {
		return err // a worker took it over from a silent one; it stops it
	}
	d, err := DataOf(rec)
	if err != nil {
		return err
	}
	d.CancelReason = action
	rec.Status, rec.Data, rec.UpdatedAt = StatusInterrupted, raw(d), s.cfg.Now().UnixNano()
	if action != "rollback" {
		return s.runlog.PutRun(ctx, rec)
	}
	ran, err := s.runs.runStarted(ctx, rec)
	if err != nil {
		return err
	}
	if !ran { // nothing to undo
		return s.runlog.DeleteRun(ctx, rec.ID)
	}
	return s.runs.rollback(ctx, &Run{rec: rec, data: d})
}

// heldElsewhere reports whether a run is running under a live lease
// although its job is not: a worker took it over from a silent one (and
// watches its job's cancellation itself).
func (s *Service) heldElsewhere(ctx context.Context, rec store.RunRecord) (bool, error) {
	if rec.Status != StatusRunning {
		return false, nil
	}
	leases, err := store.LeasesOf(s.store)
	if err != nil {
		return false, nil // a store without leases has no workers
	}
	l, err := leases.Lease(ctx, rec.Thread)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && s.cfg.Now().Before(l.ExpiresAt), err
}

// ErrNotMine: a worker was handed a run whose assistant this process lacks.
var ErrNotMine = errors.New("runs: the run's assistant is not served here")

// Execute runs a queued run to its end in this process, for a worker that
// took it from the queue; ctx carries the worker's fence (the thread's
// lease) and ends when the worker stops. A run already ended is left as
// it is. A run that is stopped (ctx done), fenced (another worker took its
// lease over) or cut off from the store (store.ErrUnavailable) is left
// running in the store, for whoever holds the lease next; Execute then
// returns why.
func (s *Service) Execute(ctx context.Context, runID string) error {
	rec, err := s.runlog.Run(ctx, runID)
	if err != nil {
		return err
	}
	if Terminal(rec.Status) {
		return nil
	}
	d, err := DataOf(rec)
	if err != nil {
		return err
	}
	a, ok := s.assistants[d.Graph()]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotMine, d.AssistantID)
	}
	prior, err := storedEvents(ctx, s.runlog, rec.ID, rec.Thread, s.RedactsFor(d.Graph()), 0, 0)
	if err != nil {
		return err
	}
	if rec.Status == StatusRunning {
		d.Attempt++
	}
	lr := s.runs.newLive(rec, d, a, prior)
	// The run's context keeps ctx's values (the fence) and ends, as a
	// shutdown, when ctx ends or this process closes.
	lr.cancel(nil)
	lr.ctx, lr.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer lr.cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrRolledBack):
			lr.cancel(&cancelCause{action: "rollback"})
		case errors.Is(cause, ErrCancelled):
			lr.cancel(&cancelCause{action: "interrupt"})
		default:
			lr.cancel(errShutdown)
		}
	})
	defer stop()
	stopBase := context.AfterFunc(s.runs.base, func() { lr.cancel(errShutdown) })
	defer stopBase()
	// Started or not is what the thread says, whatever the record says: a
	// record whose "running" was never written (the database went away)
	// may belong to a run that committed steps.
	if lr.started, err = s.runs.runStarted(ctx, rec); err != nil {
		return err
	}
	s.waitStart(lr.ctx, rec, d.Kwargs) // a worker holds a delayed run's lease while it waits
	stopped := s.runs.execute(lr)
	var cc *cancelCause
	if stopped == nil && errors.As(context.Cause(lr.ctx), &cc) && cc.action == "rollback" {
		// Before the lease goes: the thread's next run starts from here.
		stopped = s.runs.rollback(context.WithoutCancel(ctx), lr)
	}
	lr.log.release()
	close(lr.done)
	s.runs.followUpsLate(lr) // the record says it ended: the thread is not busy with it
	switch {
	case stopped != nil:
		return stopped // fenced, or the store went away: the run stays running
	case Terminal(lr.Record().Status):
		return nil // ended, cancelled included
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return nil
}

// QueueRun records and queues a run of an assistant on a thread (created
// if missing) with input, as POST /threads/{id}/runs does with
// if_not_exists create, for a program that queues without HTTP (cairn run
// --queue). The service must have Config.Queue.
func (s *Service) QueueRun(ctx context.Context, thread, assistant string, input json.RawMessage) (store.RunRecord, error) {
	if s.queue == nil {
		return store.RunRecord{}, fmt.Errorf("%w: the service queues no runs (Config.Queue)", ErrConfig)
	}
	lr, err := s.Create(WithTenant(ctx, ""), thread, Request{AssistantID: assistant, Input: input, IfNotExists: "create"})
	if err != nil {
		return store.RunRecord{}, err
	}
	return lr.Record(), nil
}

// CancelQueued cancels a queued run by id, as POST …/runs/{id}/cancel does
// (for cairn runs RUN --cancel): a run no worker has taken ends at once, a
// running one is stopped by its worker before its next commit.
func (s *Service) CancelQueued(ctx context.Context, runID string) error {
	if s.queue == nil {
		return fmt.Errorf("%w: the service queues no runs (Config.Queue)", ErrConfig)
	}
	rec, err := s.runlog.Run(ctx, runID)
	if err != nil {
		return err
	}
	if Terminal(rec.Status) {
		return newError(ErrState, "run %s has already ended (%s)", rec.ID, rec.Status)
	}
	return s.cancelQueued(ctx, rec, "interrupt")
}

// RetryQueued runs again a run that failed or was cancelled, as POST
// …/runs/{id}/retry does (for cairn runs RUN --retry): it resumes from the
// run's last checkpoint (its completed steps are not run again), or starts
// it afresh if it committed none. Only a thread's newest run is retried.
func (s *Service) RetryQueued(ctx context.Context, runID string) (store.RunRecord, error) {
	rec, err := s.runlog.Run(ctx, runID)
	if err != nil {
		return rec, err
	}
	return s.Retry(ctx, rec)
}

// Retry puts a run back: on the queue (Config.Queue), or to this
// server's runs.
func (s *Service) Retry(ctx context.Context, rec store.RunRecord) (store.RunRecord, error) {
	d, err := DataOf(rec)
	if err != nil {
		return rec, err
	}
	switch {
	case !Terminal(rec.Status):
		return rec, newError(ErrState, "run %s is %s; only an ended run is retried", rec.ID, rec.Status)
	case rec.Status == StatusSuccess:
		return rec, newError(ErrState, "run %s succeeded; start a new run instead", rec.ID)
	case rec.Status == StatusInterrupted && d.CancelReason == "":
		return rec, newError(ErrState, "run %s is paused at an interrupt: answer it (a run with command.resume) instead", rec.ID)
	}
	newest, err := s.runlog.Runs(ctx, store.RunQuery{Thread: rec.Thread, Limit: 1})
	if err != nil {
		return rec, err
	}
	if len(newest) == 1 && newest[0].ID != rec.ID {
		return rec, newError(ErrState, "thread %q has a later run (%s); only a thread's newest run is retried", APIThreadID(rec.Thread), newest[0].ID)
	}
	d.Error, d.ErrorType, d.StopReason, d.CancelReason = "", "", "", ""
	rec.Status, rec.UpdatedAt = StatusPending, s.cfg.Now().UnixNano()
	if s.queue == nil {
		rec.Data = raw(d)
		return rec, s.runs.recoverRun(ctx, rec) // counts the attempt
	}
	d.Attempt++
	rec.Data = raw(d)
	// A run that has just ended may have a job still finishing.
	for range 50 {
		if err = s.queue.RetryQueuedRun(ctx, rec); !errors.Is(err, store.ErrConflict) {
			break
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return rec, err
}
