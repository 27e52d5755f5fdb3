package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgqueue"
)

// Config configures a Worker.
type Config struct {
	// Backend is the PostgreSQL store's backend (its pool carries River);
	// Store the store over it.
	Backend *postgres.Backend
	Store   store.Store
	// Runs executes the runs (runs.Service.Execute): it holds the
	// assistants this worker has.
	Runs *runs.Service
	// Assistants are the ids of Runs's assistants: the queues taken.
	Assistants []string
	// ID names the worker (default: a random id).
	ID string
	// Concurrency is how many runs of each assistant the worker runs at
	// once (default 10).
	Concurrency int
	// LeaseTTL is how long a thread's lease lasts unless renewed (renewed
	// every third of it; default 30 s).
	LeaseTTL time.Duration
	// RescueAfter is how long a job may stay running before River gives it
	// to another worker (its worker died; default 1 min; at least
	// LeaseTTL).
	RescueAfter time.Duration
	Logger      *slog.Logger
}

// Worker takes queued runs and runs them.
type Worker struct {
	cfg    Config
	client *river.Client[pgx.Tx]
	leases store.LeaseStore
	runs   store.RunLog
	// stopSweep ends the sweep of silent workers' runs; swept is closed
	// when it has.
	stopSweep context.CancelFunc
	swept     chan struct{}
}

// ErrConfig: the worker's configuration is unusable.
var ErrConfig = errors.New("worker: invalid configuration")

// New returns a worker; it takes nothing until Start.
func New(cfg Config) (*Worker, error) {
	if cfg.Backend == nil || cfg.Store == nil || cfg.Runs == nil || len(cfg.Assistants) == 0 {
		return nil, fmt.Errorf("%w: a PostgreSQL backend, its store, a run service and assistants are needed", ErrConfig)
	}
	cfg.Concurrency = max(cfg.Concurrency, 0)
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 10
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = time.Minute
	}
	if cfg.RescueAfter < cfg.LeaseTTL {
		return nil, fmt.Errorf("%w: rescue after %s is shorter than the lease (%s): a live worker's run would be taken", ErrConfig, cfg.RescueAfter, cfg.LeaseTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg}
	var err error
	if w.leases, err = store.LeasesOf(cfg.Store); err != nil {
		return nil, err
	}
	if w.runs, err = store.RunLogOf(cfg.Store); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &runWorker{w: w}); err != nil {
		return nil, err
	}
	queues := map[string]river.QueueConfig{}
	for _, id := range cfg.Assistants {
		queues[pgqueue.QueueOf(id)] = river.QueueConfig{MaxWorkers: cfg.Concurrency}
	}
	w.client, err = river.NewClient(riverpgxv5.New(cfg.Backend.Pool()), &river.Config{
		ID: cfg.ID, Queues: queues, Workers: workers, Logger: cfg.Logger,
		JobTimeout: -1, RescueStuckJobsAfter: cfg.RescueAfter, MaxAttempts: 1000,
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return w, nil
}

// Start takes runs until Stop: from the queue, and the runs whose worker
// went silent (their thread's lease expired), which it takes over at once
// rather than wait for River's rescue of their jobs.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.client.Start(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stopSweep = cancel
	w.swept = make(chan struct{})
	go w.sweep(sctx)
	return nil
}

// Stop takes no more runs, stops the runs in flight (their current step is
// not committed; the next worker resumes them), releases their leases and
// returns.
func (w *Worker) Stop(ctx context.Context) error {
	if w.stopSweep != nil {
		w.stopSweep()
		<-w.swept
	}
	return w.client.StopAndCancel(ctx)
}

// sweep takes over, every half lease, the runs of this worker's
// assistants whose worker went silent: running with an expired lease, or
// pending for longer than the rescue delay (their job was taken by a
// worker that died before it started them).
func (w *Worker) sweep(ctx context.Context) {
	defer close(w.swept)
	t := time.NewTicker(w.cfg.LeaseTTL / 2)
	defer t.Stop()
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs, err := w.runs.Runs(ctx, store.RunQuery{Status: []string{"running", "pending"}})
		if err != nil {
			continue
		}
		for _, rec := range recs {
			// A pending run is normally its job's to start; one pending
			// for longer than the rescue delay lost its job to a worker
			// that died before starting it.
			if !w.mine(rec) || (rec.Status == "pending" && time.Since(time.Unix(0, rec.UpdatedAt)) < w.cfg.RescueAfter) {
				continue
			}
			l, err := w.leases.Lease(ctx, rec.Thread)
			if err != nil || time.Now().Before(l.ExpiresAt) {
				continue
			}
			if first, err := w.oldest(ctx, rec.Thread); err != nil || first != rec.ID {
				continue
			}
			lease, err := w.leases.Acquire(ctx, rec.Thread, w.ID(), w.cfg.LeaseTTL)
			if err != nil {
				continue // another worker was quicker
			}
			w.cfg.Logger.Info("run taken over (its worker went silent)", "run", rec.ID, "thread", rec.Thread, "token", lease.Token, "previous", l.Owner)
			running.Go(func() {
				if err := w.runLeased(ctx, rec.ID, lease); err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
					w.cfg.Logger.Warn("running a taken-over run failed", "run", rec.ID, "err", err)
				}
			})
		}
	}
}

// mine reports whether a run's assistant is one of this worker's.
func (w *Worker) mine(rec store.RunRecord) bool {
	var d struct {
		AssistantID string `json:"assistant_id"`
	}
	return json.Unmarshal(rec.Data, &d) == nil && slices.Contains(w.cfg.Assistants, d.AssistantID)
}

// ID is the worker's id (as River knows it).
func (w *Worker) ID() string { return w.client.ID() }

// runWorker is River's worker of run jobs.
type runWorker struct {
	river.WorkerDefaults[pgqueue.RunArgs]
	w *Worker
}

// Work runs one queued run: the thread's oldest unfinished run first,
// under the thread's lease.
func (rw *runWorker) Work(ctx context.Context, job *river.Job[pgqueue.RunArgs]) error {
	w := rw.w
	rec, err := w.runs.Run(ctx, job.Args.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted with its thread
	}
	if err != nil {
		return err
	}
	if rec.Status != "pending" && rec.Status != "running" {
		return nil
	}
	if first, err := w.oldest(ctx, rec.Thread); err != nil {
		return err
	} else if first != rec.ID {
		return river.JobSnooze(200 * time.Millisecond) // an earlier run of the thread goes first
	}
	lease, err := w.leases.Acquire(ctx, rec.Thread, w.ID(), w.cfg.LeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		// The thread's previous run is handing over (or being taken over).
		return river.JobSnooze(min(w.cfg.LeaseTTL/4, time.Second))
	}
	if err != nil {
		return err
	}
	w.cfg.Logger.Info("run taken", "run", rec.ID, "thread", rec.Thread, "token", lease.Token, "attempt", job.Attempt)
	err = w.runLeased(ctx, rec.ID, lease)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFenced):
		w.cfg.Logger.Warn("run taken over by another worker; stopped without writing", "run", rec.ID, "thread", rec.Thread, "token", lease.Token)
		return river.JobSnooze(w.cfg.LeaseTTL) // the new owner finishes it; the job lives on until the run ends
	case ctx.Err() != nil:
		return river.JobSnooze(time.Second) // stopping: another worker resumes it
	case errors.Is(err, store.ErrUnavailable):
		w.cfg.Logger.Warn("store unavailable during a run; it goes on from its last checkpoint", "run", rec.ID, "err", err)
		return river.JobSnooze(time.Second)
	}
	return err
}

// cancelled stops a run whose job was cancelled, as its canceller asked:
// interrupted, or rolled back. known: the job was cancelled (its worker
// was told so), so a cancellation that cannot be read interrupts the run;
// otherwise (the periodic look of a taken-over run) it is looked at again
// at the next renewal.
func (w *Worker) cancelled(ctx context.Context, runID string, cancel context.CancelCauseFunc, known bool) {
	action, err := pgqueue.CancelledAs(context.WithoutCancel(ctx), w.cfg.Backend, runID)
	switch {
	case err != nil && !known:
		w.cfg.Logger.Debug("reading a run's cancellation failed; looked at again at the next renewal", "run", runID, "err", err)
	case err != nil:
		w.cfg.Logger.Warn("reading a run's cancellation failed; interrupting it", "run", runID, "err", err)
		cancel(runs.ErrCancelled)
	case action == "rollback":
		cancel(runs.ErrRolledBack)
	case action != "":
		cancel(runs.ErrCancelled)
	}
}

// oldest is the id of the thread's oldest unfinished run.
func (w *Worker) oldest(ctx context.Context, thread string) (string, error) {
	recs, err := w.runs.Runs(ctx, store.RunQuery{Thread: thread, Status: []string{"pending", "running"}})
	if err != nil || len(recs) == 0 {
		return "", err
	}
	slices.SortFunc(recs, func(a, b store.RunRecord) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return recs[0].ID, nil
}

// runLeased runs a run under its thread's lease, renewing it; losing the
// lease stops the run.
func (w *Worker) runLeased(jobCtx context.Context, runID string, lease store.Lease) error {
	// The run's context keeps the job's values and ends with it — a remote
	// cancel (river.ErrJobCancelledRemotely) as runs.ErrCancelled, so
	// that the run ends interrupted rather than left running.
	ctx, cancel := context.WithCancelCause(store.WithFence(context.WithoutCancel(jobCtx), lease.Thread, lease.Token))
	defer cancel(nil)
	stopJob := context.AfterFunc(jobCtx, func() {
		if errors.Is(context.Cause(jobCtx), river.ErrJobCancelledRemotely) {
			w.cancelled(ctx, runID, cancel, true)
			return
		}
		cancel(context.Cause(jobCtx))
	})
	defer stopJob()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(w.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l, err := w.leases.Renew(context.WithoutCancel(ctx), lease, w.cfg.LeaseTTL)
				if err != nil {
					cancel(err)
					return
				}
				lease = l
				// A run taken over from a silent worker has no job of this
				// worker's to be cancelled through: its job's state says.
				w.cancelled(ctx, runID, cancel, false)
			}
		}
	}()
	err := w.cfg.Runs.Execute(ctx, runID)
	cancel(nil)
	<-renewed
	if rerr := w.leases.Release(context.WithoutCancel(ctx), lease); rerr != nil && err == nil && !errors.Is(rerr, store.ErrFenced) {
		err = rerr
	}
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, store.ErrFenced) {
		return cause
	}
	return err
}
