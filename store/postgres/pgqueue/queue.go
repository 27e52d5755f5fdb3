package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
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

// Migrate creates or updates River's tables in the store's schema.
func Migrate(ctx context.Context, b *postgres.Backend) error {
	m, err := rivermigrate.New(riverpgxv5.New(b.Pool()), nil)
	if err != nil {
		return fmt.Errorf("store: queue: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("store: queue: migrating River's tables: %w", err)
	}
	return nil
}

// Queue is the run queue of a PostgreSQL backend (store.RunQueue): run
// records in the backend's tables, their jobs in River's, written in one
// transaction. Make one with New; Of gives one for a store.
type Queue struct {
	b *postgres.Backend
	// inserter is an insert-only River client, made once.
	once   sync.Once
	client *river.Client[pgx.Tx]
	err    error
}

// New returns the run queue of a backend. Its records are written as
// given: a store that seals its run log (store.Options.Keyring) must seal
// them too, which Of does.
func New(b *postgres.Backend) *Queue { return &Queue{b: b} }

// Of returns the run queue of a store on PostgreSQL, sealing the run
// records it writes as the store seals its own (store.RunQueueFor);
// store.ErrInvalidArgument for a store on another backend.
func Of(s store.Store) (store.RunQueue, error) {
	if e, ok := s.(*store.Engine); ok {
		if b, ok := e.Backend().(*postgres.Backend); ok {
			return store.RunQueueFor(s, New(b)), nil
		}
	}
	return nil, fmt.Errorf("%w: runs are queued for workers on PostgreSQL stores only", store.ErrInvalidArgument)
}

// writable fails on a read-only backend.
func (q *Queue) writable() error {
	if q.b.ReadOnly() {
		return store.ErrReadOnly
	}
	return nil
}

// EnqueueRun records a run and puts its job on its assistant's queue in
// one transaction: both or neither.
func (q *Queue) EnqueueRun(ctx context.Context, r store.RunRecord, assistant string) error {
	if err := q.writable(); err != nil {
		return err
	}
	client, err := q.riverClient()
	if err != nil {
		return err
	}
	return q.b.RunTx(ctx, "enqueue run", r.Thread, func(tx pgx.Tx) error {
		if err := postgres.PutRunTx(ctx, tx, r); err != nil {
			return err
		}
		_, err := client.InsertTx(ctx, tx, RunArgs{RunID: r.ID}, &river.InsertOpts{Queue: QueueOf(assistant), UniqueOpts: river.UniqueOpts{ByArgs: true}})
		return postgres.WrapError(err, "enqueue run", r.Thread)
	})
}

var _ store.RunQueue = (*Queue)(nil)

// CancelQueuedRun cancels a queued run's job through River, recording
// the action (interrupt or rollback) in the job's metadata (cairn_cancel)
// for its worker: a job not yet taken is cancelled at once (started
// false: nobody will run the run); a running one is marked, and its
// worker's context ends (with river.ErrJobCancelledRemotely) so that it
// stops the run (started true).
func (q *Queue) CancelQueuedRun(ctx context.Context, runID, action string) (started bool, err error) {
	if err := q.writable(); err != nil {
		return false, err
	}
	client, err := q.riverClient()
	if err != nil {
		return false, err
	}
	err = q.b.RunTx(ctx, "cancel run", runID, func(tx pgx.Tx) error {
		jobID, err := jobOf(ctx, tx, runID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE river_job SET metadata = metadata || jsonb_build_object('cairn_cancel', $2::text) WHERE id = $1`, jobID, action); err != nil {
			return postgres.WrapError(err, "cancel run", "")
		}
		row, err := client.JobCancelTx(ctx, tx, jobID)
		if err != nil {
			return postgres.WrapError(err, "cancel run", "")
		}
		started = row.State == rivertype.JobStateRunning
		return nil
	})
	return started, err
}

// CancelledAs reports how a run's job was cancelled: the action given to
// CancelQueuedRun, or "" while it is not cancelled.
func CancelledAs(ctx context.Context, b *postgres.Backend, runID string) (string, error) {
	var action string
	err := b.Pool().QueryRow(ctx, `SELECT COALESCE(metadata->>'cairn_cancel', '') FROM river_job WHERE kind = $1 AND args->>'run_id' = $2 AND (state = 'cancelled' OR metadata ? 'cancel_attempted_at') ORDER BY id DESC LIMIT 1`,
		RunArgs{}.Kind(), runID).Scan(&action)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return action, postgres.WrapError(err, "read a run's job", "")
}

// riverClient is the queue's insert-only River client, made on first use.
func (q *Queue) riverClient() (*river.Client[pgx.Tx], error) {
	q.once.Do(func() {
		q.client, q.err = river.NewClient(riverpgxv5.New(q.b.Pool()), &river.Config{})
	})
	if q.err != nil {
		return nil, fmt.Errorf("store: queue: %w", q.err)
	}
	return q.client, nil
}

// jobOf is the id of a run's newest job.
func jobOf(ctx context.Context, tx pgx.Tx, runID string) (int64, error) {
	var jobID int64
	err := tx.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args->>'run_id' = $2 ORDER BY id DESC LIMIT 1`, RunArgs{}.Kind(), runID).Scan(&jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no queued job for run %q", store.ErrNotFound, runID)
	}
	return jobID, postgres.WrapError(err, "find a run's job", "")
}

// RetryQueuedRun writes a run's record and makes its job available again
// (River's JobRetry), in one transaction: a worker takes the run as it
// takes a new one, and resumes it from its last checkpoint.
func (q *Queue) RetryQueuedRun(ctx context.Context, r store.RunRecord) error {
	if err := q.writable(); err != nil {
		return err
	}
	client, err := q.riverClient()
	if err != nil {
		return err
	}
	return q.b.RunTx(ctx, "retry run", r.Thread, func(tx pgx.Tx) error {
		jobID, err := jobOf(ctx, tx, r.ID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE river_job SET metadata = metadata - 'cairn_cancel' WHERE id = $1 AND state <> 'running'`, jobID); err != nil {
			return postgres.WrapError(err, "retry run", r.Thread)
		}
		row, err := client.JobRetryTx(ctx, tx, jobID)
		if err != nil {
			return postgres.WrapError(err, "retry run", r.Thread)
		}
		if row.State == rivertype.JobStateRunning {
			return fmt.Errorf("%w: run %q's job is still running; try again when it has ended", store.ErrConflict, r.ID)
		}
		return postgres.PutRunTx(ctx, tx, r)
	})
}

// QueueStats counts the run jobs by queue and state, and the unexpired
// leases by worker.
func (q *Queue) QueueStats(ctx context.Context) (store.QueueStats, error) {
	st := store.QueueStats{Jobs: map[string]map[string]int{}, Workers: map[string]int{}}
	pool := q.b.Pool()
	rows, err := pool.Query(ctx, `SELECT queue, state::text, count(*) FROM river_job WHERE kind = $1 GROUP BY 1, 2`, RunArgs{}.Kind())
	if err != nil {
		return st, postgres.WrapError(err, "queue stats", "")
	}
	var queue, state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&queue, &state, &n}, func() error {
		if st.Jobs[queue] == nil {
			st.Jobs[queue] = map[string]int{}
		}
		st.Jobs[queue][state] = n
		return nil
	})
	if err != nil {
		return st, postgres.WrapError(err, "queue stats", "")
	}
	rows, err = pool.Query(ctx, `SELECT owner, count(*) FROM cairn_leases WHERE expires_at > $1 GROUP BY 1`, time.Now().UnixNano())
	if err != nil {
		return st, postgres.WrapError(err, "queue stats", "")
	}
	_, err = pgx.ForEachRow(rows, []any{&queue, &n}, func() error {
		st.Workers[queue] = n
		return nil
	})
	return st, postgres.WrapError(err, "queue stats", "")
}
