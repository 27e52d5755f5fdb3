package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// CreateThread implements driver.Backend.
func (b *Backend) CreateThread(ctx context.Context, t driver.ThreadRecord) error {
	// An existing thread is refused before anything is written, and a
	// failure after it fails the whole batch: no savepoint is needed.
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := b.ensureThread.ExecContext(ctx, t.ID, t.Tenant, nullBytes(t.Metadata), t.CreatedAt, int64(t.Sum))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
		}
		return b.indexThread(ctx, t, 1)
	})
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// threadColumns reads a thread record with its head (the newest row of
// its root namespace); oldThreadColumns the same from a file of a format
// before 5, and legacyThreadColumns from a format 1 file, whose rows have
// no checksum.
var (
	threadHead    = `FROM lanes l JOIN checkpoints c ON ` + inLane + ` WHERE l.thread = t.id AND l.ns = '' ORDER BY c.id DESC LIMIT 1`
	threadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.id - (l.id << 32) ` + threadHead + `), 0),
	COALESCE((SELECT c.created_at ` + threadHead + `), 0), t.crc`
)

const (
	oldThreadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.seq FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0),
	COALESCE((SELECT c.created_at FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0), t.crc`
	legacyThreadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.seq FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0),
	COALESCE((SELECT c.created_at FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0), 0`
)

// listColumns are threadColumns with the status (format 6).
var listColumns = threadColumns + `, t.status`

func (b *Backend) threadColumns() string {
	switch {
	case b.legacy:
		return legacyThreadColumns
	case b.noLanes:
		return oldThreadColumns
	case b.noIndex:
		return threadColumns
	}
	return listColumns
}

func (b *Backend) scanThread(sc interface{ Scan(...any) error }) (driver.ThreadRecord, error) {
	var r driver.ThreadRecord
	var sum int64
	var err error
	if b.noIndex {
		err = sc.Scan(&r.ID, &r.Tenant, &r.Metadata, &r.CreatedAt, &r.Head, &r.HeadAt, &sum)
	} else {
		var st int
		err = sc.Scan(&r.ID, &r.Tenant, &r.Metadata, &r.CreatedAt, &r.Head, &r.HeadAt, &sum, &st)
		r.Status = store.ThreadStatus(st)
	}
	r.Sum = uint32(sum)
	if b.legacy {
		r.Sum = driver.ThreadChecksum(&r)
	}
	return r, err
}

// Thread implements driver.Backend.
func (b *Backend) Thread(ctx context.Context, id string) (driver.ThreadRecord, error) {
	r, err := b.scanThread(b.read.QueryRowContext(ctx, `SELECT `+b.threadColumns()+` FROM threads t WHERE t.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	return r, b.readErr(err, id, "", 0, "thread")
}

// metadataMatch compares one top-level metadata member with a JSON scalar.
// Key and value are parameters; the text of the query never holds them.
const metadataMatch = ` AND EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ? AND
	(CASE j.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' ELSE json_quote(j.value) END) = ?)`

// metadataAbsent: a top-level metadata member absent or null (a null
// filter), on a file without the metadata index.
const metadataAbsent = ` AND NOT EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ? AND j.type <> 'null')`

// Threads implements driver.Backend.
func (b *Backend) Threads(ctx context.Context, q driver.ThreadQuery) ([]driver.ThreadRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + b.threadColumns() + ` FROM threads t WHERE t.id > ?`)
	args := []any{q.After}
	if q.Tenant != "" {
		sb.WriteString(` AND t.tenant = ?`)
		args = append(args, q.Tenant)
	}
	if b.noIndex {
		for k, v := range q.Metadata {
			if string(v) == "null" {
				sb.WriteString(metadataAbsent)
				args = append(args, k)
				continue
			}
			sb.WriteString(metadataMatch)
			args = append(args, k, string(v))
		}
	} else {
		w := sqlWhere{args: args}
		sb.WriteString(w.where(driver.ListQuery{AllTenants: true, Meta: q.Meta}))
		args = w.args
	}
	sb.WriteString(` ORDER BY t.id`)
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	rows, err := b.read.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, b.readErr(err, q.After, "", 0, "thread list")
	}
	defer rows.Close()
	var out []driver.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, b.readErr(err, q.After, "", 0, "thread list")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), q.After, "", 0, "thread list")
}

// DeleteThread implements driver.Backend.
func (b *Backend) DeleteThread(ctx context.Context, id string) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			if err := b.unindexThread(ctx, c, id); err != nil {
				return err
			}
			res, err := c.ExecContext(ctx, `DELETE FROM threads WHERE id = ?`, id)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			if _, err := c.ExecContext(ctx, `DELETE FROM run_events WHERE run IN (SELECT id FROM runs WHERE thread = ?)`, id); err != nil {
				return err
			}
			r, err := c.ExecContext(ctx, `DELETE FROM checkpoints WHERE id IN (SELECT c.id FROM lanes l JOIN checkpoints c ON `+inLane+` WHERE l.thread = ?)`, id)
			if err != nil {
				return err
			}
			m, _ := r.RowsAffected()
			n += m
			for _, table := range []string{"lanes", "snapshots", "writes", "runs"} {
				r, err := c.ExecContext(ctx, `DELETE FROM `+table+` WHERE thread = ?`, id)
				if err != nil {
					return err
				}
				m, _ := r.RowsAffected()
				n += m
			}
			if n == 0 {
				return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
			}
			return nil
		})
	})
}
