package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadUsage implements driver.StorageBackend, in one read transaction (a
// consistent view): SQLite's length() of a blob reads its size from the
// row's header, not the blob's pages.
func (b *Backend) ThreadUsage(ctx context.Context, thread string) (driver.ThreadUsage, error) {
	tx, err := b.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "storage")
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE id = ?`, thread).Scan(&n); err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "thread")
	}
	if n == 0 {
		return driver.ThreadUsage{}, fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
	}
	u := driver.ThreadUsage{PendingWrites: map[string]store.StoredRows{}}
	rows, err := tx.QueryContext(ctx, `SELECT ns, count(*), coalesce(sum(length(data)), 0) FROM writes WHERE thread = ? GROUP BY ns`, thread)
	if err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "pending writes")
	}
	defer rows.Close()
	for rows.Next() {
		var ns string
		var w store.StoredRows
		if err := rows.Scan(&ns, &w.Count, &w.Bytes); err != nil {
			return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "pending writes")
		}
		u.PendingWrites[ns] = w
	}
	if err := rows.Err(); err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "pending writes")
	}
	if ok, err := b.hasRuns(ctx, tx); err != nil || !ok {
		return u, b.readErr(err, thread, "", 0, "runs")
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(data)), 0) FROM runs WHERE thread = ?`, thread).Scan(&u.Runs.Count, &u.Runs.Bytes); err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "runs")
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(e.data)), 0) FROM runs r JOIN run_events e ON e.run = r.id WHERE r.thread = ?`, thread).Scan(&u.RunEvents.Count, &u.RunEvents.Bytes); err != nil {
		return driver.ThreadUsage{}, b.readErr(err, thread, "", 0, "run events")
	}
	return u, nil
}

// hasRuns reports whether the file has the runs tables: a file of a
// format before 3, opened read-only, has none (and so no runs).
func (b *Backend) hasRuns(ctx context.Context, tx *sql.Tx) (bool, error) {
	if !b.noItems {
		return true, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'`).Scan(&n)
	return n > 0, err
}

var _ driver.StorageBackend = (*Backend)(nil)
