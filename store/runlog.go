package store

import (
	"context"
	"fmt"
)

// RunRecord is one run as the HTTP server (package server) keeps it: the
// fields it queries by, and the rest as JSON the store does not read.
type RunRecord struct {
	ID        string
	Thread    string
	Tenant    string
	Status    string
	CreatedAt int64 // Unix nanoseconds
	UpdatedAt int64 // Unix nanoseconds
	Data      []byte
}

// RunEnded reports whether a run status is an end (any but pending and
// running).
func RunEnded(status string) bool { return status != "pending" && status != "running" }

// RunQuery selects runs, newest first (by CreatedAt, then ID).
type RunQuery struct {
	Tenant string
	// Thread limits the runs to one thread; empty means every thread.
	Thread string
	// Status keeps only runs with one of these statuses.
	Status []string
	Limit  int // 0: all
	Offset int
}

// EventRecord is one event of a run's log: Seq numbers them from 1,
// across the run's attempts.
//
// Backends store Seq and Data; the run log RunLogOf returns keeps Attempt
// and Ref with the data (see frameEvent), so every backend keeps them
// without a column of its own.
type EventRecord struct {
	Seq int64
	// Attempt is the attempt of the run that logged the event (0 in logs
	// written before attempts were recorded with their events).
	Attempt int
	// Ref, when set, names the checkpoint of the run's thread that holds
	// the event's content (a whole state, say): Data keeps only what
	// rebuilding the event needs besides it, so a log costs what the run
	// did, not a copy of the state per event.
	Ref  *EventRef
	Data []byte
}

// EventRef names a checkpoint of a run's thread: its namespace and seq.
type EventRef struct {
	Namespace string
	Seq       int64
}

// RunLog keeps runs and the log of events each run streamed, so that a
// client that reconnects gets what it missed and a restarted server finds
// the runs it was running. Deleting a thread deletes its runs and logs;
// pruning a thread's checkpoints deletes the logs whose events referred
// to them (EventRecord.Ref).
type RunLog interface {
	// PutRun inserts a run, or replaces the one with the same ID.
	PutRun(ctx context.Context, r RunRecord) error
	// Run returns a run; ErrNotFound.
	Run(ctx context.Context, id string) (RunRecord, error)
	// Runs lists runs, newest first.
	Runs(ctx context.Context, q RunQuery) ([]RunRecord, error)
	// DeleteRun deletes a run and its log; ErrNotFound.
	DeleteRun(ctx context.Context, id string) error
	// AppendEvents adds events to a run's log in one transaction;
	// ErrConflict, writing nothing, when one of their seqs is taken.
	AppendEvents(ctx context.Context, run string, evs []EventRecord) error
	// Events returns the events of a run's log with seq > after, in order
	// (limit 0: all).
	Events(ctx context.Context, run string, after int64, limit int) ([]EventRecord, error)
	// DeleteEvents deletes a run's event log and keeps its record;
	// ErrNotFound when the run does not exist.
	DeleteEvents(ctx context.Context, run string) error
	// TrimEvents deletes the event logs of the runs that ended (any status
	// but pending and running) before endedBefore (Unix nanoseconds, their
	// UpdatedAt), keeping their records, and returns how many logs went.
	TrimEvents(ctx context.Context, endedBefore int64) (int64, error)
}

// RunLogOf returns the run log of a store whose backend keeps one (every
// built-in backend does); ErrInvalidArgument otherwise.
func RunLogOf(s Store) (RunLog, error) {
	if e, ok := s.(*Engine); ok {
		if rl, ok := e.b.(RunLog); ok {
			return checkedRunLog{rl: rl, e: e}, nil
		}
	}
	if rl, ok := s.(RunLog); ok {
		return framedRunLog{rl}, nil
	}
	return nil, fmt.Errorf("%w: this store keeps no run log", ErrInvalidArgument)
}

// checkedRunLog refuses calls on a closed store and bad ids before the
// backend sees them.
type checkedRunLog struct {
	rl RunLog
	e  *Engine
}

func (c checkedRunLog) check(id string) error {
	if c.e.closed.Load() {
		return ErrClosed
	}
	return ValidateThreadID(id)
}

func (c checkedRunLog) PutRun(ctx context.Context, r RunRecord) error {
	if err := c.check(r.ID); err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	if err := c.check(r.Thread); err != nil {
		return err
	}
	return c.rl.PutRun(ctx, c.e.crypt.ring.sealRun(r))
}

func (c checkedRunLog) Run(ctx context.Context, id string) (RunRecord, error) {
	if err := c.check(id); err != nil {
		return RunRecord{}, fmt.Errorf("run id: %w", err)
	}
	r, err := c.rl.Run(ctx, id)
	if err != nil {
		return RunRecord{}, err
	}
	return c.e.crypt.ring.openRun(r)
}

func (c checkedRunLog) Runs(ctx context.Context, q RunQuery) ([]RunRecord, error) {
	if c.e.closed.Load() {
		return nil, ErrClosed
	}
	if q.Limit < 0 || q.Offset < 0 {
		return nil, fmt.Errorf("%w: limit and offset must not be negative", ErrInvalidArgument)
	}
	runs, err := c.rl.Runs(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if runs[i], err = c.e.crypt.ring.openRun(runs[i]); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

func (c checkedRunLog) DeleteRun(ctx context.Context, id string) error {
	if err := c.check(id); err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	return c.rl.DeleteRun(ctx, id)
}

func (c checkedRunLog) AppendEvents(ctx context.Context, run string, evs []EventRecord) error {
	if err := c.check(run); err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	for _, ev := range evs {
		if ev.Seq < 1 {
			return fmt.Errorf("%w: event seq %d of run %q", ErrInvalidArgument, ev.Seq, run)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return c.rl.AppendEvents(ctx, run, c.e.crypt.ring.sealEvents(run, frameEvents(evs)))
}

func (c checkedRunLog) Events(ctx context.Context, run string, after int64, limit int) ([]EventRecord, error) {
	if err := c.check(run); err != nil {
		return nil, fmt.Errorf("run id: %w", err)
	}
	evs, err := c.rl.Events(ctx, run, after, limit)
	if err != nil {
		return nil, err
	}
	if evs, err = c.e.crypt.ring.openEvents(run, evs); err != nil {
		return nil, err
	}
	return unframeEvents(run, evs)
}

func (c checkedRunLog) DeleteEvents(ctx context.Context, run string) error {
	if err := c.check(run); err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	return c.rl.DeleteEvents(ctx, run)
}

func (c checkedRunLog) TrimEvents(ctx context.Context, endedBefore int64) (int64, error) {
	if c.e.closed.Load() {
		return 0, ErrClosed
	}
	return c.rl.TrimEvents(ctx, endedBefore)
}

// RunQueue records runs and queues them for workers in one transaction
// (store/postgres/pgqueue, over River, for a PostgreSQL store).
type RunQueue interface {
	EnqueueRun(ctx context.Context, r RunRecord, assistant string) error
	// CancelQueuedRun cancels a run's job, recording the action
	// (interrupt or rollback) for its worker: at once if no worker has it
	// (started false), else by ending its worker's context (started true).
	CancelQueuedRun(ctx context.Context, runID, action string) (started bool, err error)
	// RetryQueuedRun writes a run's record (pending again) and puts its
	// job back on the queue, in one transaction; ErrConflict while its job
	// is still running.
	RetryQueuedRun(ctx context.Context, r RunRecord) error
	// QueueStats reports the queue: its jobs by queue and state, and the
	// workers holding threads' leases.
	QueueStats(ctx context.Context) (QueueStats, error)
}

// QueueStats is the state of the run queue.
type QueueStats struct {
	// Jobs counts the run jobs of each queue by state (available,
	// running, scheduled, retryable, completed, cancelled, discarded).
	Jobs map[string]map[string]int
	// Workers are the workers holding unexpired leases, with how many
	// threads each holds.
	Workers map[string]int
}

// RunQueueFor returns q as the run queue of store s: the run records q
// writes (EnqueueRun, RetryQueuedRun) are sealed as s seals its run log
// (Options.Keyring), so that RunLogOf(s) reads them; q itself when s
// seals nothing. A PostgreSQL store's queue is store/postgres/pgqueue's
// (pgqueue.Of).
func RunQueueFor(s Store, q RunQueue) RunQueue {
	if e, ok := s.(*Engine); ok && e.crypt.ring != nil {
		return sealedQueue{RunQueue: q, ring: e.crypt.ring}
	}
	return q
}
