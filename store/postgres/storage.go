package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadUsage implements driver.StorageBackend, in one read-only
// REPEATABLE READ transaction (a consistent view). octet_length is the
// bytes of the stored value, before PostgreSQL's own compression (TOAST).
func (b *Backend) ThreadUsage(ctx context.Context, thread string) (driver.ThreadUsage, error) {
	u := driver.ThreadUsage{PendingWrites: map[string]store.StoredRows{}}
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM cairn_threads WHERE id = $1`, thread).Scan(&n); err != nil {
			return wrap(err, "thread", thread)
		}
		if n == 0 {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
		}
		rows, err := tx.Query(ctx, `SELECT ns, count(*), coalesce(sum(octet_length(data)), 0) FROM cairn_writes WHERE thread = $1 GROUP BY ns`, thread)
		if err != nil {
			return wrap(err, "pending writes", thread)
		}
		var ns string
		var w store.StoredRows
		if _, err := pgx.ForEachRow(rows, []any{&ns, &w.Count, &w.Bytes}, func() error {
			u.PendingWrites[ns] = w
			return nil
		}); err != nil {
			return wrap(err, "pending writes", thread)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM cairn_runs WHERE thread = $1`, thread).Scan(&u.Runs.Count, &u.Runs.Bytes); err != nil {
			return wrap(err, "runs", thread)
		}
		err = tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(e.data)), 0) FROM cairn_runs r JOIN cairn_run_events e ON e.run = r.id WHERE r.thread = $1`, thread).Scan(&u.RunEvents.Count, &u.RunEvents.Bytes)
		return wrap(err, "run events", thread)
	})
	if err != nil {
		return driver.ThreadUsage{}, wrap(err, "storage", thread)
	}
	return u, nil
}

var _ driver.StorageBackend = (*Backend)(nil)
