package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

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
