package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// errNotSwapped rolls a rewrite back when the stored bytes changed.
var errNotSwapped = errors.New("not swapped")

// swap runs the updates of one compare-and-swap in a savepoint: each must
// change one row, or none is kept.
func (b *Backend) swap(ctx context.Context, stmts ...swapStmt) (bool, error) {
	err := b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			for _, s := range stmts {
				res, err := c.ExecContext(ctx, s.sql, s.args...)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return errNotSwapped
				}
			}
			return nil
		})
	})
	if errors.Is(err, errNotSwapped) {
		return false, nil
	}
	return err == nil, err
}

type swapStmt struct {
	sql  string
	args []any
}

// RewriteRow implements driver.BlobRewriter.
func (b *Backend) RewriteRow(ctx context.Context, old, nw driver.Row) (bool, error) {
	stmts := []swapStmt{{`UPDATE checkpoints SET meta = ?1, patch = ?2, base_size = ?3, crc = ?4 WHERE id = ` + laneKey("?5", "?6") + ` + ?7 AND crc = ?8 AND patch = ?9`,
		[]any{nullBytes(nw.Meta), nw.Patch, nw.BaseSize, int64(nw.Sum), old.Thread, old.Namespace, old.Seq, int64(old.Sum), old.Patch}}}
	if nw.Snapshot != nil {
		stmts = append(stmts, swapStmt{`UPDATE snapshots SET data = ? WHERE thread = ? AND ns = ? AND seq = ? AND data = ?`,
			[]any{nw.Snapshot, old.Thread, old.Namespace, old.Seq, old.Snapshot}})
	}
	return b.swap(ctx, stmts...)
}

// ThreadWrites implements driver.BlobRewriter.
func (b *Backend) ThreadWrites(ctx context.Context, thread string) ([]driver.StoredWrite, error) {
	rows, err := b.read.QueryContext(ctx, `SELECT ns, seq, task, data FROM writes WHERE thread = ? ORDER BY ns, seq, task`, thread)
	if err != nil {
		return nil, b.readErr(err, thread, "", 0, "pending writes")
	}
	defer rows.Close()
	var out []driver.StoredWrite
	for rows.Next() {
		w := driver.StoredWrite{Thread: thread}
		if err := rows.Scan(&w.Namespace, &w.Seq, &w.Task, &w.Data); err != nil {
			return nil, b.readErr(err, thread, "", 0, "pending writes")
		}
		out = append(out, w)
	}
	return out, b.readErr(rows.Err(), thread, "", 0, "pending writes")
}

// RewriteWrite implements driver.BlobRewriter.
func (b *Backend) RewriteWrite(ctx context.Context, w driver.StoredWrite, nw []byte) (bool, error) {
	return b.swap(ctx, swapStmt{`UPDATE writes SET data = ? WHERE thread = ? AND ns = ? AND seq = ? AND task = ? AND data = ?`,
		[]any{nw, w.Thread, w.Namespace, w.Seq, w.Task, w.Data}})
}

// RewriteRun implements driver.BlobRewriter.
func (b *Backend) RewriteRun(ctx context.Context, id string, old, nw []byte) (bool, error) {
	return b.swap(ctx, swapStmt{`UPDATE runs SET data = ? WHERE id = ? AND data = ?`, []any{nw, id, old}})
}

// RewriteEvent implements driver.BlobRewriter.
func (b *Backend) RewriteEvent(ctx context.Context, run string, seq int64, old, nw []byte) (bool, error) {
	return b.swap(ctx, swapStmt{`UPDATE run_events SET data = ? WHERE run = ? AND seq = ? AND data = ?`, []any{nw, run, seq, old}})
}

var _ driver.BlobRewriter = (*Backend)(nil)

// StoredItems implements driver.ItemRewriter.
func (b *Backend) StoredItems(ctx context.Context, after driver.ItemKey, limit int) ([]driver.ItemRow, error) {
	if b.noItems {
		return nil, nil
	}
	rows, err := b.read.QueryContext(ctx, `SELECT tenant, ns, key, value FROM items WHERE (tenant, ns, key) > (?, ?, ?) ORDER BY tenant, ns, key LIMIT ?`,
		after.Tenant, after.Namespace, after.Key, limit)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "items")
	}
	defer rows.Close()
	var out []driver.ItemRow
	for rows.Next() {
		var r driver.ItemRow
		if err := rows.Scan(&r.Tenant, &r.Namespace, &r.Key, &r.Value); err != nil {
			return nil, b.readErr(err, "", "", 0, "items")
		}
		if r.Value, err = decodeItemValue(r.ItemKey, r.Value); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), "", "", 0, "items")
}

// RewriteItem implements driver.ItemRewriter.
func (b *Backend) RewriteItem(ctx context.Context, k driver.ItemKey, old, nw []byte) (bool, error) {
	oldVal, err := encodeItemValue(k, old)
	if err != nil {
		return false, err
	}
	nwVal, err := encodeItemValue(k, nw)
	if err != nil {
		return false, err
	}
	return b.swap(ctx, swapStmt{`UPDATE items SET value = ? WHERE tenant = ? AND ns = ? AND key = ? AND value = ?`, []any{nwVal, k.Tenant, k.Namespace, k.Key, oldVal}})
}

var _ driver.ItemRewriter = (*Backend)(nil)

// Vacuum implements driver.Vacuumer: it rebuilds the database file and
// empties its WAL, so that no freed page — such as the plaintext blobs
// an encrypting rekey replaced — is left in either. Writers wait while it
// runs (it holds the write connection outside any transaction).
func (b *Backend) Vacuum(ctx context.Context) error {
	if b.readOnly {
		return fmt.Errorf("%w: %s", store.ErrReadOnly, b.path)
	}
	b.wmu.Lock()
	for b.leading && !b.closed {
		b.idle.Wait()
	}
	if b.closed {
		b.wmu.Unlock()
		return store.ErrClosed
	}
	b.leading = true
	b.wmu.Unlock()
	_, err := b.conn.ExecContext(ctx, `VACUUM`)
	if err == nil {
		_, err = b.conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	// Hand the lead on as a leader does.
	b.wmu.Lock()
	if len(b.queue) > 0 {
		b.queue[0].done <- errLead
	} else {
		b.leading = false
		b.idle.Broadcast()
	}
	b.wmu.Unlock()
	if err != nil {
		return b.writeErr("vacuum", err)
	}
	return nil
}

var _ driver.Vacuumer = (*Backend)(nil)
