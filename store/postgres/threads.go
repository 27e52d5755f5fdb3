package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
)

// CreateThread implements driver.Backend.
func (b *Backend) CreateThread(ctx context.Context, t driver.ThreadRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	args, err := createArgs(&t)
	if err != nil {
		return err
	}
	tag, err := b.pool.Exec(ctx, createThreadSQL, args...)
	if err != nil {
		return wrap(err, "create", t.ID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
	}
	return nil
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

const threadColumns = `t.id, t.tenant, t.metadata::text, t.created_at,
	COALESCE((SELECT max(c.seq) FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = ''), 0),
	COALESCE((SELECT c.created_at FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0)`

func (b *Backend) threadColumns() string { return threadColumns + `, t.crc, t.status` }

func (b *Backend) scanThread(row pgx.Row) (driver.ThreadRecord, error) {
	var r driver.ThreadRecord
	var meta *string
	var sum int64
	var st int16
	if err := row.Scan(&r.ID, &r.Tenant, &meta, &r.CreatedAt, &r.Head, &r.HeadAt, &sum, &st); err != nil {
		return r, err
	}
	r.Status = store.ThreadStatus(st)
	if meta != nil {
		r.Metadata = []byte(*meta)
	}
	r.Sum = uint32(sum)
	if sum != int64(r.Sum) {
		r.Sum = ^driver.ThreadChecksum(&r)
	}
	return r, nil
}

// Thread implements driver.Backend.
func (b *Backend) Thread(ctx context.Context, id string) (driver.ThreadRecord, error) {
	r, err := b.scanThread(b.pool.QueryRow(ctx, `SELECT `+b.threadColumns()+` FROM cairn_threads t WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	return r, wrap(err, "thread", id)
}

// Threads implements driver.Backend. Metadata filters are lookups in the
// metadata index, with keys and values as parameters.
func (b *Backend) Threads(ctx context.Context, q driver.ThreadQuery) ([]driver.ThreadRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + b.threadColumns() + ` FROM cairn_threads t WHERE t.id > $1`)
	args := []any{q.After}
	if q.Tenant != "" {
		args = append(args, q.Tenant)
		sb.WriteString(` AND t.tenant = $` + strconv.Itoa(len(args)))
	}
	w := pgWhere{args: args}
	sb.WriteString(w.where(driver.ListQuery{AllTenants: true, Meta: q.Meta}))
	args = w.args
	sb.WriteString(` ORDER BY t.id`)
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sb.WriteString(` LIMIT $` + strconv.Itoa(len(args)))
	}
	rows, err := b.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, wrap(err, "thread list", q.After)
	}
	defer rows.Close()
	var out []driver.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, wrap(err, "thread list", q.After)
		}
		out = append(out, r)
	}
	return out, wrap(rows.Err(), "thread list", q.After)
}

// DeleteThread implements driver.Backend.
func (b *Backend) DeleteThread(ctx context.Context, id string) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "delete", id, func(tx pgx.Tx) error {
		if err := unindexThread(ctx, tx, id); err != nil {
			return wrap(err, "delete", id)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM cairn_run_events WHERE run IN (SELECT id FROM cairn_runs WHERE thread = $1)`, id); err != nil {
			return wrap(err, "delete", id)
		}
		var n int64
		for _, table := range []string{"cairn_threads", "cairn_checkpoints", "cairn_snapshots", "cairn_writes", "cairn_runs"} {
			col := "thread"
			if table == "cairn_threads" {
				col = "id"
			}
			tag, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE `+col+` = $1`, id)
			if err != nil {
				return wrap(err, "delete", id)
			}
			n += tag.RowsAffected()
		}
		if n == 0 {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
		}
		return nil
	})
}
