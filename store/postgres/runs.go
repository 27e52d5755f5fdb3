package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-dev/cairn/store"
)

// PutRun implements store.RunLog.
func (b *Backend) PutRun(ctx context.Context, r store.RunRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	return putRun(ctx, b.pool, r)
}

// putRun upserts a run record on a pool or in a transaction.
func putRun(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, r store.RunRecord) error {
	_, err := db.Exec(ctx, `INSERT INTO cairn_runs (id, thread, tenant, status, created_at, updated_at, data) VALUES ($1,$2,$3,$4,$5,$6,$7)
		ON CONFLICT (id) DO UPDATE SET thread = EXCLUDED.thread, tenant = EXCLUDED.tenant, status = EXCLUDED.status,
		created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, data = EXCLUDED.data`,
		r.ID, r.Thread, r.Tenant, r.Status, r.CreatedAt, r.UpdatedAt, r.Data)
	return wrap(err, "put run", r.Thread)
}

const runColumns = `id, thread, tenant, status, created_at, updated_at, data`

func scanRun(row pgx.Row) (store.RunRecord, error) {
	var r store.RunRecord
	err := row.Scan(&r.ID, &r.Thread, &r.Tenant, &r.Status, &r.CreatedAt, &r.UpdatedAt, &r.Data)
	return r, err
}

// Run implements store.RunLog.
func (b *Backend) Run(ctx context.Context, id string) (store.RunRecord, error) {
	r, err := scanRun(b.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM cairn_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return r, wrap(err, "run", r.Thread)
}

// Runs implements store.RunLog.
func (b *Backend) Runs(ctx context.Context, q store.RunQuery) ([]store.RunRecord, error) {
	var limit *int
	if q.Limit > 0 {
		limit = &q.Limit
	}
	var status []string
	if len(q.Status) > 0 {
		status = q.Status
	}
	rows, err := b.pool.Query(ctx, `SELECT `+runColumns+` FROM cairn_runs
		WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR thread = $2) AND ($3::text[] IS NULL OR status = ANY($3))
		ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5`, q.Tenant, q.Thread, status, limit, q.Offset)
	if err != nil {
		return nil, wrap(err, "runs", q.Thread)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.RunRecord, error) { return scanRun(r) })
	return out, wrap(err, "runs", q.Thread)
}

// DeleteRun implements store.RunLog.
func (b *Backend) DeleteRun(ctx context.Context, id string) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "delete run", "", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM cairn_runs WHERE id = $1`, id)
		if err != nil {
			return wrap(err, "delete run", "")
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: run %q", store.ErrNotFound, id)
		}
		_, err = tx.Exec(ctx, `DELETE FROM cairn_run_events WHERE run = $1`, id)
		return wrap(err, "delete run", "")
	})
}

// AppendEvents implements store.RunLog: the events go in one batch, in one
// transaction.
func (b *Backend) AppendEvents(ctx context.Context, run string, evs []store.EventRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "append events", "", func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM cairn_runs WHERE id = $1`, run).Scan(&n); err != nil {
			return wrap(err, "append events", "")
		}
		if n == 0 {
			return fmt.Errorf("%w: run %q", store.ErrNotFound, run)
		}
		batch := &pgx.Batch{}
		for _, ev := range evs {
			batch.Queue(`INSERT INTO cairn_run_events (run, seq, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, run, ev.Seq, ev.Data)
		}
		br := tx.SendBatch(ctx, batch)
		for _, ev := range evs {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return wrap(err, "append events", "")
			}
			if tag.RowsAffected() == 0 {
				br.Close()
				return fmt.Errorf("%w: event %d of run %q exists", store.ErrConflict, ev.Seq, run)
			}
		}
		return wrap(br.Close(), "append events", "")
	})
}

// Events implements store.RunLog.
func (b *Backend) Events(ctx context.Context, run string, after int64, limit int) ([]store.EventRecord, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := b.pool.Query(ctx, `SELECT seq, data FROM cairn_run_events WHERE run = $1 AND seq > $2 ORDER BY seq LIMIT $3`, run, after, lim)
	if err != nil {
		return nil, wrap(err, "run events", "")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.EventRecord, error) {
		var ev store.EventRecord
		err := r.Scan(&ev.Seq, &ev.Data)
		return ev, err
	})
	if err != nil {
		return nil, wrap(err, "run events", "")
	}
	if len(out) == 0 {
		if _, err := b.Run(ctx, run); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeleteEvents implements store.RunLog.
func (b *Backend) DeleteEvents(ctx context.Context, run string) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "delete events", "", func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM cairn_runs WHERE id = $1`, run).Scan(&n); err != nil {
			return wrap(err, "delete events", "")
		}
		if n == 0 {
			return fmt.Errorf("%w: run %q", store.ErrNotFound, run)
		}
		_, err := tx.Exec(ctx, `DELETE FROM cairn_run_events WHERE run = $1`, run)
		return wrap(err, "delete events", "")
	})
}

// TrimEvents implements store.RunLog: it walks the runs that still have
// events (the primary key's index), not every run ever kept.
func (b *Backend) TrimEvents(ctx context.Context, endedBefore int64) (int64, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	var n int64
	err := b.inTx(ctx, "trim events", "", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT l.run FROM (SELECT DISTINCT run FROM cairn_run_events) l JOIN cairn_runs r ON r.id = l.run
			WHERE r.status NOT IN ('pending', 'running') AND r.updated_at < $1`, endedBefore)
		if err != nil {
			return wrap(err, "trim events", "")
		}
		runs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(runs) == 0 {
			return wrap(err, "trim events", "")
		}
		n = int64(len(runs))
		_, err = tx.Exec(ctx, `DELETE FROM cairn_run_events WHERE run = ANY($1)`, runs)
		return wrap(err, "trim events", "")
	})
	return n, err
}

var _ store.RunLog = (*Backend)(nil)
