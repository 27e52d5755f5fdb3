package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store/driver"
)

// errNotSwapped rolls a rewrite back when the stored bytes changed.
var errNotSwapped = errors.New("not swapped")

type swapStmt struct {
	sql  string
	args []any
}

// swap runs the updates of one compare-and-swap in a transaction: each
// must change one row, or none is kept.
func (b *Backend) swap(ctx context.Context, thread string, stmts ...swapStmt) (bool, error) {
	if err := b.writable(); err != nil {
		return false, err
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			tag, err := tx.Exec(ctx, s.sql, s.args...)
			if err != nil {
				return wrap(err, "rekey", thread)
			}
			if tag.RowsAffected() != 1 {
				return errNotSwapped
			}
		}
		return nil
	})
	if errors.Is(err, errNotSwapped) {
		return false, nil
	}
	return err == nil, err
}

// RewriteRow implements driver.BlobRewriter.
func (b *Backend) RewriteRow(ctx context.Context, old, nw driver.Row) (bool, error) {
	stmts := []swapStmt{{`UPDATE cairn_checkpoints SET meta = $1, patch = $2, base_size = $3, crc = $4 WHERE thread = $5 AND ns = $6 AND seq = $7 AND crc = $8 AND patch = $9`,
		[]any{nw.Meta, nw.Patch, nw.BaseSize, int64(nw.Sum), old.Thread, old.Namespace, old.Seq, int64(old.Sum), old.Patch}}}
	if nw.Snapshot != nil {
		stmts = append(stmts, swapStmt{`UPDATE cairn_snapshots SET data = $1 WHERE thread = $2 AND ns = $3 AND seq = $4 AND data = $5`,
			[]any{nw.Snapshot, old.Thread, old.Namespace, old.Seq, old.Snapshot}})
	}
	return b.swap(ctx, old.Thread, stmts...)
}

// ThreadWrites implements driver.BlobRewriter.
func (b *Backend) ThreadWrites(ctx context.Context, thread string) ([]driver.StoredWrite, error) {
	rows, err := b.pool.Query(ctx, `SELECT ns, seq, task, data FROM cairn_writes WHERE thread = $1 ORDER BY ns, seq, task`, thread)
	if err != nil {
		return nil, wrap(err, "pending writes", thread)
	}
	defer rows.Close()
	var out []driver.StoredWrite
	for rows.Next() {
		w := driver.StoredWrite{Thread: thread}
		if err := rows.Scan(&w.Namespace, &w.Seq, &w.Task, &w.Data); err != nil {
			return nil, wrap(err, "pending writes", thread)
		}
		out = append(out, w)
	}
	return out, wrap(rows.Err(), "pending writes", thread)
}

// RewriteWrite implements driver.BlobRewriter.
func (b *Backend) RewriteWrite(ctx context.Context, w driver.StoredWrite, nw []byte) (bool, error) {
	return b.swap(ctx, w.Thread, swapStmt{`UPDATE cairn_writes SET data = $1 WHERE thread = $2 AND ns = $3 AND seq = $4 AND task = $5 AND data = $6`,
		[]any{nw, w.Thread, w.Namespace, w.Seq, w.Task, w.Data}})
}

// RewriteRun implements driver.BlobRewriter.
func (b *Backend) RewriteRun(ctx context.Context, id string, old, nw []byte) (bool, error) {
	return b.swap(ctx, "", swapStmt{`UPDATE cairn_runs SET data = $1 WHERE id = $2 AND data = $3`, []any{nw, id, old}})
}

// RewriteEvent implements driver.BlobRewriter.
func (b *Backend) RewriteEvent(ctx context.Context, run string, seq int64, old, nw []byte) (bool, error) {
	return b.swap(ctx, "", swapStmt{`UPDATE cairn_run_events SET data = $1 WHERE run = $2 AND seq = $3 AND data = $4`, []any{nw, run, seq, old}})
}

var _ driver.BlobRewriter = (*Backend)(nil)

// StoredItems implements driver.ItemRewriter.
func (b *Backend) StoredItems(ctx context.Context, after driver.ItemKey, limit int) ([]driver.ItemRow, error) {
	rows, err := b.pool.Query(ctx, `SELECT tenant, ns, key, value FROM cairn_items WHERE (tenant, ns, key) > ($1, $2, $3) ORDER BY tenant, ns, key LIMIT $4`,
		after.Tenant, after.Namespace, after.Key, limit)
	if err != nil {
		return nil, wrap(err, "items", "")
	}
	defer rows.Close()
	var out []driver.ItemRow
	for rows.Next() {
		var r driver.ItemRow
		if err := rows.Scan(&r.Tenant, &r.Namespace, &r.Key, &r.Value); err != nil {
			return nil, wrap(err, "items", "")
		}
		if r.Value, err = decodeItemValue(r.ItemKey, r.Value); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, wrap(rows.Err(), "items", "")
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
	return b.swap(ctx, "", swapStmt{`UPDATE cairn_items SET value = $1 WHERE tenant = $2 AND ns = $3 AND key = $4 AND value = $5`, []any{nwVal, k.Tenant, k.Namespace, k.Key, oldVal}})
}

var _ driver.ItemRewriter = (*Backend)(nil)

// Vacuum implements driver.Vacuumer: VACUUM FULL rewrites the store's
// tables, so that no dead row version — the rows a prune deleted, the
// plaintext an encrypting rekey replaced — is left in their files. It
// locks each table while it rewrites it: the other processes' reads and
// writes wait.
func (b *Backend) Vacuum(ctx context.Context) error {
	if err := b.writable(); err != nil {
		return err
	}
	_, err := b.pool.Exec(ctx, `VACUUM FULL `+strings.Join(tables, ", "))
	return wrap(err, "vacuum", "")
}

var _ driver.Vacuumer = (*Backend)(nil)
