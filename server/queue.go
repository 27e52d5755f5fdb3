package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// enqueue records a run and queues it for workers (Config.Queue). A second
// run on a busy thread is refused (reject) or waits its turn (enqueue:
// workers take a thread's runs oldest first, one at a time); interrupt and
// rollback need the run in progress in this process.
func (s *Server) enqueue(ctx context.Context, lr *liveRun) error {
	switch lr.data.MultitaskStrategy {
	case "interrupt", "rollback":
		return unprocessable("$.multitask_strategy", "%q is not available for queued runs (reject or enqueue)", lr.data.MultitaskStrategy)
	case "reject":
		busy, err := s.queuedBusy(ctx, lr.rec.Thread)
		if err != nil {
			return err
		}
		if busy {
			return conflict("thread %q is busy with a queued run (multitask_strategy reject); wait for it, or ask for enqueue", lr.rec.Thread)
		}
	}
	lr.rec.Data = raw(lr.data)
	return s.queue.EnqueueRun(ctx, lr.rec, lr.data.AssistantID)
}

// queuedBusy reports whether a thread has a pending or running run in the
// store.
func (s *Server) queuedBusy(ctx context.Context, thread string) (bool, error) {
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Status: []string{statusPending, statusRunning}, Limit: 1})
	return len(recs) > 0, err
}

// busy reports whether a thread has a run in progress or waiting: in this
// process, or, with a queue, in the store.
func (s *Server) busy(ctx context.Context, thread string) bool {
	if s.runs.busy(thread) {
		return true
	}
	if s.queue == nil {
		return false
	}
	b, err := s.queuedBusy(ctx, thread)
	return err == nil && b
}

// ErrCancelled, as the cause of the context Execute runs under (a worker
// translates its queue's remote cancellation to it), interrupts the run:
// it ends with status interrupted rather than being left running.
var ErrCancelled = errors.New("server: run cancelled")

// cancelQueued cancels a run this server queued (Config.Queue): a run no
// worker has taken ends at once (status interrupted); a running one is
// stopped by its worker before its next commit.
func (s *Server) cancelQueued(ctx context.Context, rec store.RunRecord, action string) error {
	if action != "interrupt" {
		return unprocessable("action", "%q is not available for queued runs (interrupt)", action)
	}
	started, err := s.queue.CancelQueuedRun(ctx, rec.ID)
	if err != nil || started {
		return err
	}
	_, d, err := apiRunOf(rec)
	if err != nil {
		return err
	}
	d.CancelReason = action
	rec.Status, rec.Data, rec.UpdatedAt = statusInterrupted, raw(d), s.cfg.Now().UnixNano()
	return s.runlog.PutRun(ctx, rec)
}

// ErrNotMine: a worker was handed a run whose assistant this server lacks.
var ErrNotMine = errors.New("server: the run's assistant is not served here")

// Execute runs a queued run to its end in this process, for a worker that
// took it from the queue; ctx carries the worker's fence (the thread's
// lease) and ends when the worker stops. A run already ended is left as
// it is. A run that is stopped (ctx done), fenced (another worker took its
// lease over) or cut off from the store (store.ErrUnavailable) is left
// running in the store, for whoever holds the lease next; Execute then
// returns why.
func (s *Server) Execute(ctx context.Context, runID string) error {
	rec, err := s.runlog.Run(ctx, runID)
	if err != nil {
		return err
	}
	if terminal(rec.Status) {
		return nil
	}
	_, d, err := apiRunOf(rec)
	if err != nil {
		return err
	}
	a, ok := s.assistants[d.AssistantID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotMine, d.AssistantID)
	}
	prior, err := storedEvents(ctx, s.runlog, rec.ID, 0, 0)
	if err != nil {
		return err
	}
	if rec.Status == statusRunning {
		d.Attempt++
	}
	lr := s.runs.newLive(rec, d, a, prior)
	// The run's context keeps ctx's values (the fence) and ends, as a
	// shutdown, when ctx ends or this server closes.
	lr.cancel(nil)
	lr.ctx, lr.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer lr.cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), ErrCancelled) {
			lr.cancel(&cancelCause{action: "interrupt"})
			return
		}
		lr.cancel(errShutdown)
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
	stopped := s.runs.execute(lr)
	lr.log.release()
	close(lr.done)
	switch {
	case stopped != nil:
		return stopped // fenced, or the store went away: the run stays running
	case terminal(lr.record().Status):
		return nil // ended, cancelled included
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return nil
}

// QueueRun records and queues a run of an assistant on a thread (created
// if missing) with input, as POST /threads/{id}/runs does with
// if_not_exists create, for a program that queues without HTTP (cairn run
// --queue). The server must have Config.Queue.
func (s *Server) QueueRun(ctx context.Context, thread, assistant string, input json.RawMessage) (store.RunRecord, error) {
	if s.queue == nil {
		return store.RunRecord{}, fmt.Errorf("%w: the server queues no runs (Config.Queue)", ErrConfig)
	}
	lr, err := s.createRun(withTenant(ctx, ""), thread, runRequest{AssistantID: assistant, Input: input, IfNotExists: "create"})
	if err != nil {
		return store.RunRecord{}, err
	}
	return lr.record(), nil
}

// CancelQueued cancels a queued run by id, as POST …/runs/{id}/cancel does
// (for cairn runs RUN --cancel): a run no worker has taken ends at once, a
// running one is stopped by its worker before its next commit.
func (s *Server) CancelQueued(ctx context.Context, runID string) error {
	if s.queue == nil {
		return fmt.Errorf("%w: the server queues no runs (Config.Queue)", ErrConfig)
	}
	rec, err := s.runlog.Run(ctx, runID)
	if err != nil {
		return err
	}
	if terminal(rec.Status) {
		return conflict("run %s has already ended (%s)", rec.ID, rec.Status)
	}
	return s.cancelQueued(ctx, rec, "interrupt")
}
