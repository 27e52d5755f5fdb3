package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// PutWrites implements driver.Backend.
func (b *Backend) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []store.Write) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		var exists int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE id = ?`, thread).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
		}
		return savepoint(ctx, c, func() error { return putWrites(ctx, c, thread, ns, seq, ws) })
	})
}

// putWrites writes pending writes on c (inside the caller's transaction).
func putWrites(ctx context.Context, c *sql.Conn, thread, ns string, seq int64, ws []store.Write) error {
	for _, w := range ws {
		if _, err := c.ExecContext(ctx, `INSERT OR REPLACE INTO writes (thread, ns, seq, task, node, data) VALUES (?,?,?,?,?,?)`,
			thread, ns, seq, w.Task, w.Node, []byte(w.Update)); err != nil {
			return err
		}
	}
	return nil
}

// Writes implements driver.Backend.
func (b *Backend) Writes(ctx context.Context, thread, ns string, seq int64) ([]store.Write, error) {
	rows, err := b.read.QueryContext(ctx, `SELECT task, node, data FROM writes WHERE thread = ? AND ns = ? AND seq = ? ORDER BY task`, thread, ns, seq)
	if err != nil {
		return nil, b.readErr(err, thread, ns, seq, "pending writes")
	}
	defer rows.Close()
	var out []store.Write
	for rows.Next() {
		var w store.Write
		var data []byte
		if err := rows.Scan(&w.Task, &w.Node, &data); err != nil {
			return nil, b.readErr(err, thread, ns, seq, "pending writes")
		}
		w.Update = data
		out = append(out, w)
	}
	return out, b.readErr(rows.Err(), thread, ns, seq, "pending writes")
}
