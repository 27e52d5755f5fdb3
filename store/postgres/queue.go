package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairn-dev/cairn/store"
)

// RunArgs is the queue job of a run: its id; a worker reads the rest from
// the run's record.
type RunArgs struct {
	RunID string `json:"run_id"`
}

// Kind implements river.JobArgs.
func (RunArgs) Kind() string { return "cairn_run" }

// QueueOf is the River queue of an assistant's runs: a worker takes only
// the runs of the assistants it has.
func QueueOf(assistant string) string { return "cairn_" + assistant }

// Pool is the backend's connection pool (for River's workers).
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// MigrateQueue creates or updates River's tables in the store's schema.
func (b *Backend) MigrateQueue(ctx context.Context) error {
	m, err := rivermigrate.New(riverpgxv5.New(b.pool), nil)
	if err != nil {
		return fmt.Errorf("store: queue: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("store: queue: migrating River's tables: %w", err)
	}
	return nil
}

// inserter is an insert-only River client, made once.
type inserter struct {
	once   sync.Once
	client *river.Client[pgx.Tx]
	err    error
}

// EnqueueRun records a run and puts its job on its assistant's queue in
// one transaction: both or neither.
func (b *Backend) EnqueueRun(ctx context.Context, r store.RunRecord, assistant string) error {
	if err := b.writable(); err != nil {
		return err
	}
	b.queue.once.Do(func() {
		b.queue.client, b.queue.err = river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	})
	if b.queue.err != nil {
		return fmt.Errorf("store: queue: %w", b.queue.err)
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if err := putRun(ctx, tx, r); err != nil {
			return err
		}
		_, err := b.queue.client.InsertTx(ctx, tx, RunArgs{RunID: r.ID}, &river.InsertOpts{Queue: QueueOf(assistant), UniqueOpts: river.UniqueOpts{ByArgs: true}})
		return wrap(err, "enqueue run", r.Thread)
	})
}

var _ store.RunQueue = (*Backend)(nil)

// CancelQueuedRun cancels a queued run's job through River: a job not
// yet taken is cancelled at once (started false: nobody will run the
// run); a running one is marked, and its worker's context ends (with
// river.ErrJobCancelledRemotely) so that it stops the run (started true).
func (b *Backend) CancelQueuedRun(ctx context.Context, runID string) (started bool, err error) {
	if err := b.writable(); err != nil {
		return false, err
	}
	b.queue.once.Do(func() {
		b.queue.client, b.queue.err = river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	})
	if b.queue.err != nil {
		return false, fmt.Errorf("store: queue: %w", b.queue.err)
	}
	var jobID int64
	err = b.pool.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args->>'run_id' = $2 ORDER BY id DESC LIMIT 1`, RunArgs{}.Kind(), runID).Scan(&jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("%w: no queued job for run %q", store.ErrNotFound, runID)
	}
	if err != nil {
		return false, wrap(err, "cancel run", "")
	}
	row, err := b.queue.client.JobCancel(ctx, jobID)
	if err != nil {
		return false, wrap(err, "cancel run", "")
	}
	return row.State == rivertype.JobStateRunning, nil
}
