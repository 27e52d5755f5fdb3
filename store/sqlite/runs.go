package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// PutRun implements store.RunLog.
func (b *Backend) PutRun(ctx context.Context, r store.RunRecord) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `INSERT OR REPLACE INTO runs (id, thread, tenant, status, created_at, updated_at, data) VALUES (?,?,?,?,?,?,?)`,
			r.ID, r.Thread, r.Tenant, r.Status, r.CreatedAt, r.UpdatedAt, r.Data)
		return err
	})
}

const runColumns = `id, thread, tenant, status, created_at, updated_at, data`

func scanRun(row interface{ Scan(...any) error }) (store.RunRecord, error) {
	var r store.RunRecord
	err := row.Scan(&r.ID, &r.Thread, &r.Tenant, &r.Status, &r.CreatedAt, &r.UpdatedAt, &r.Data)
	return r, err
}

// Run implements store.RunLog.
func (b *Backend) Run(ctx context.Context, id string) (store.RunRecord, error) {
	r, err := scanRun(b.read.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return r, b.readErr(err, r.Thread, "", 0, "run")
}

// Runs implements store.RunLog.
func (b *Backend) Runs(ctx context.Context, q store.RunQuery) ([]store.RunRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + runColumns + ` FROM runs WHERE 1`)
	var args []any
	if q.Tenant != "" {
		sb.WriteString(` AND tenant = ?`)
		args = append(args, q.Tenant)
	}
	if q.Thread != "" {
		sb.WriteString(` AND thread = ?`)
		args = append(args, q.Thread)
	}
	if len(q.Status) > 0 {
		sb.WriteString(` AND status IN (?` + strings.Repeat(",?", len(q.Status)-1) + `)`)
		for _, s := range q.Status {
			args = append(args, s)
		}
	}
	sb.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`)
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = -1
	}
	args = append(args, limit, q.Offset)
	rows, err := b.read.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, b.readErr(err, q.Thread, "", 0, "runs")
	}
	defer rows.Close()
	var out []store.RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, b.readErr(err, q.Thread, "", 0, "runs")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), q.Thread, "", 0, "runs")
}

// DeleteRun implements store.RunLog.
func (b *Backend) DeleteRun(ctx context.Context, id string) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			res, err := c.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("%w: run %q", store.ErrNotFound, id)
			}
			_, err = c.ExecContext(ctx, `DELETE FROM run_events WHERE run = ?`, id)
			return err
		})
	})
}

// AppendEvents implements store.RunLog.
func (b *Backend) AppendEvents(ctx context.Context, run string, evs []store.EventRecord) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			if err := runExists(ctx, c, run); err != nil {
				return err
			}
			for _, ev := range evs {
				res, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO run_events (run, seq, data) VALUES (?,?,?)`, run, ev.Seq, ev.Data)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					return fmt.Errorf("%w: event %d of run %q exists", store.ErrConflict, ev.Seq, run)
				}
			}
			return nil
		})
	})
}

// Events implements store.RunLog.
func (b *Backend) Events(ctx context.Context, run string, after int64, limit int) ([]store.EventRecord, error) {
	lim := int64(limit)
	if lim <= 0 {
		lim = -1
	}
	rows, err := b.read.QueryContext(ctx, `SELECT seq, data FROM run_events WHERE run = ? AND seq > ? ORDER BY seq LIMIT ?`, run, after, lim)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "run events")
	}
	defer rows.Close()
	var out []store.EventRecord
	for rows.Next() {
		var ev store.EventRecord
		if err := rows.Scan(&ev.Seq, &ev.Data); err != nil {
			return nil, b.readErr(err, "", "", 0, "run events")
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, b.readErr(err, "", "", 0, "run events")
	}
	if len(out) == 0 {
		if _, err := b.Run(ctx, run); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runExists is ErrNotFound for a run that is not stored.
func runExists(ctx context.Context, c *sql.Conn, run string) error {
	var n int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, run).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	return nil
}

// DeleteEvents implements store.RunLog.
func (b *Backend) DeleteEvents(ctx context.Context, run string) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			if err := runExists(ctx, c, run); err != nil {
				return err
			}
			_, err := c.ExecContext(ctx, `DELETE FROM run_events WHERE run = ?`, run)
			return err
		})
	})
}

// endedLogs selects the runs that have an event log and ended before a
// time: it walks the runs that still have events (the primary key's
// index), not every run ever kept.
const endedLogs = `SELECT l.run FROM (SELECT DISTINCT run FROM run_events) l JOIN runs r ON r.id = l.run
	WHERE r.status NOT IN ('pending', 'running') AND r.updated_at < ?`

// TrimEvents implements store.RunLog.
func (b *Backend) TrimEvents(ctx context.Context, endedBefore int64) (int64, error) {
	var n int64
	err := b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			if err := c.QueryRowContext(ctx, `SELECT count(*) FROM (`+endedLogs+`)`, endedBefore).Scan(&n); err != nil {
				return err
			}
			_, err := c.ExecContext(ctx, `DELETE FROM run_events WHERE run IN (`+endedLogs+`)`, endedBefore)
			return err
		})
	})
	return n, err
}

var _ store.RunLog = (*Backend)(nil)
