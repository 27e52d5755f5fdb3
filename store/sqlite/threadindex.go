package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// The thread index (format 6): each thread's status, status time and
// touch time in columns of threads, with indexes that lead with the
// tenant; the metadata index thread_meta; the counters thread_counts (per
// metadata entry) and thread_totals (per status). Every write that
// changes them changes them in its own transaction.

// indexTables are the tables format 6 adds.
var indexTables = []string{"thread_meta", "thread_counts", "thread_totals"}

// indexStmts are the writer's prepared statements of the thread index.
type indexStmts struct {
	insertMeta, deleteMeta, bumpCount, dropCount, bumpTotal, readHead, setHead, touch *sql.Stmt
}

func (b *Backend) prepareIndex(ctx context.Context) error {
	if b.ix.insertMeta != nil {
		return nil // prepared by a migration of this open
	}
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&b.ix.insertMeta, `INSERT OR IGNORE INTO thread_meta (tenant, key, value, created_at, thread) VALUES (?,?,?,?,?)`},
		{&b.ix.deleteMeta, `DELETE FROM thread_meta WHERE tenant = ? AND key = ? AND value = ? AND created_at = ? AND thread = ?`},
		{&b.ix.bumpCount, `INSERT INTO thread_counts (tenant, key, value, n) VALUES (?,?,?,?) ON CONFLICT (tenant, key, value) DO UPDATE SET n = n + excluded.n`},
		{&b.ix.dropCount, `DELETE FROM thread_counts WHERE tenant = ? AND key = ? AND value = ? AND n <= 0`},
		{&b.ix.bumpTotal, `INSERT INTO thread_totals (tenant, status, n) VALUES (?,?,?) ON CONFLICT (tenant, status) DO UPDATE SET n = n + excluded.n`},
		{&b.ix.readHead, `SELECT tenant, status, created_at FROM threads WHERE id = ?`},
		{&b.ix.setHead, `UPDATE threads SET status = ?, status_at = ?, touched_at = ? WHERE id = ?`},
		// The status and its time unchanged, only the touch index moves.
		{&b.ix.touch, `UPDATE threads SET touched_at = ? WHERE id = ?`},
	} {
		var err error
		if *p.st, err = b.conn.PrepareContext(ctx, p.sql); err != nil {
			return err
		}
	}
	return nil
}

func (s *indexStmts) all() []*sql.Stmt {
	return []*sql.Stmt{s.insertMeta, s.deleteMeta, s.bumpCount, s.dropCount, s.bumpTotal, s.readHead, s.setHead, s.touch}
}

// statusAt is the status time a status set at at stores: at for a status
// other than idle, 0 for idle (the status-time index holds only the
// threads that are not idle).
func statusAt(st store.ThreadStatus, at int64) int64 {
	if st == store.ThreadIdle {
		return 0
	}
	return at
}

// indexThread adds a new thread (tenant, metadata, creation time, status)
// to the metadata index and the counters (sign 1), or takes it out (-1).
func (b *Backend) indexThread(ctx context.Context, t driver.ThreadRecord, sign int64) error {
	entries, err := driver.IndexEntries(t.Metadata)
	if err != nil {
		return err
	}
	if err := b.indexEntries(ctx, t, entries, sign); err != nil {
		return err
	}
	st := t.Status
	if st == 0 && sign > 0 {
		st = store.ThreadIdle
	}
	_, err = b.ix.bumpTotal.ExecContext(ctx, t.Tenant, int(st), sign)
	return err
}

// indexEntries adds a thread's metadata entries (sign 1) or takes them
// out (-1), with their counters.
func (b *Backend) indexEntries(ctx context.Context, t driver.ThreadRecord, entries []driver.MetaEntry, sign int64) error {
	for _, e := range entries {
		st := b.ix.insertMeta
		if sign < 0 {
			st = b.ix.deleteMeta
		}
		if e.Value == driver.MetaPresent {
			st = nil // counted, not indexed
		}
		if st != nil {
			if _, err := st.ExecContext(ctx, t.Tenant, e.Key, e.Value, t.CreatedAt, t.ID); err != nil {
				return err
			}
		}
		if _, err := b.ix.bumpCount.ExecContext(ctx, t.Tenant, e.Key, e.Value, sign); err != nil {
			return err
		}
		if sign < 0 {
			if _, err := b.ix.dropCount.ExecContext(ctx, t.Tenant, e.Key, e.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// setHead writes a thread's status, status time and touch time as its new
// head at at gives them, moving it between status counters.
func (b *Backend) setHead(ctx context.Context, id string, st store.ThreadStatus, at int64, touch bool) error {
	var tenant string
	var old int
	var created int64
	err := b.ix.readHead.QueryRowContext(ctx, id).Scan(&tenant, &old, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	touched := at
	if !touch {
		touched = created
	}
	if old == int(st) && st == store.ThreadIdle {
		_, err := b.ix.touch.ExecContext(ctx, touched, id)
		return err
	}
	if _, err := b.ix.setHead.ExecContext(ctx, int(st), statusAt(st, at), touched, id); err != nil {
		return err
	}
	if old == int(st) {
		return nil
	}
	if _, err := b.ix.bumpTotal.ExecContext(ctx, tenant, old, -1); err != nil {
		return err
	}
	_, err = b.ix.bumpTotal.ExecContext(ctx, tenant, int(st), 1)
	return err
}

// rootEmptied makes a thread whose root namespace has no rows left idle,
// touched at its creation (its UpdatedAt).
func (b *Backend) rootEmptied(ctx context.Context, c *sql.Conn, id string) error {
	var one int
	err := c.QueryRowContext(ctx, `SELECT 1 FROM lanes l JOIN checkpoints c ON `+inLane+` WHERE l.thread = ? AND l.ns = '' LIMIT 1`, id).Scan(&one)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return b.setHead(ctx, id, store.ThreadIdle, 0, false)
}

// UpdateThread implements driver.Backend: the metadata index follows the
// new metadata (the old entries read from the stored row, in the same
// transaction).
func (b *Backend) UpdateThread(ctx context.Context, t driver.ThreadRecord) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		var old driver.ThreadRecord
		err := c.QueryRowContext(ctx, `SELECT tenant, metadata, created_at FROM threads WHERE id = ?`, t.ID).Scan(&old.Tenant, &old.Metadata, &old.CreatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, t.ID)
		}
		if err != nil {
			return err
		}
		old.ID = t.ID
		before, err := driver.IndexEntries(old.Metadata)
		if err != nil {
			return err
		}
		after, err := driver.IndexEntries(t.Metadata)
		if err != nil {
			return err
		}
		// Nothing is written before this point, and a failure after it
		// fails the whole batch: no savepoint is needed.
		gone, added := driver.DiffEntries(before, after)
		if err := b.indexEntries(ctx, old, gone, -1); err != nil {
			return err
		}
		if err := b.indexEntries(ctx, old, added, 1); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, `UPDATE threads SET metadata = ?, crc = ? WHERE id = ?`, nullBytes(t.Metadata), int64(t.Sum), t.ID)
		return err
	})
}

// SetThreadStatus implements driver.ThreadIndex.
func (b *Backend) SetThreadStatus(ctx context.Context, id string, st store.ThreadStatus, at int64) error {
	if !st.Valid() {
		return fmt.Errorf("%w: thread status %d", store.ErrInvalidArgument, st)
	}
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		var cur int
		err := c.QueryRowContext(ctx, `SELECT status FROM threads WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) || cur != int(store.ThreadStatusUnknown) {
			return nil
		}
		if err != nil {
			return err
		}
		return b.setHead(ctx, id, st, at, true)
	})
}

// UnclassifiedThreads implements driver.ThreadIndex.
func (b *Backend) UnclassifiedThreads(ctx context.Context, after string, limit int) ([]string, error) {
	if b.noIndex {
		return nil, nil
	}
	rows, err := b.read.QueryContext(ctx, `SELECT id FROM threads WHERE id > ? AND status = 0 ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, b.readErr(err, after, "", 0, "thread list")
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, b.readErr(err, after, "", 0, "thread list")
		}
		out = append(out, id)
	}
	return out, b.readErr(rows.Err(), after, "", 0, "thread list")
}

// unindexThread takes a thread about to be deleted out of the metadata
// index and the counters.
func (b *Backend) unindexThread(ctx context.Context, c *sql.Conn, id string) error {
	t := driver.ThreadRecord{ID: id}
	var st int
	err := c.QueryRowContext(ctx, `SELECT tenant, metadata, created_at, status FROM threads WHERE id = ?`, id).Scan(&t.Tenant, &t.Metadata, &t.CreatedAt, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	t.Status = store.ThreadStatus(st)
	return b.indexThread(ctx, t, -1)
}

// threadIndexColumns are the columns format 6 adds to threads.
var threadIndexColumns = []struct{ name, def string }{
	{"status", "INTEGER NOT NULL DEFAULT 2"},
	{"status_at", "INTEGER NOT NULL DEFAULT 0"},
	{"touched_at", "INTEGER NOT NULL DEFAULT 0"},
}

// addThreadColumns gives the threads table of an unversioned file of an
// older format the columns of format 6, before the baseline indexes them.
func (b *Backend) addThreadColumns(ctx context.Context) error {
	for _, col := range threadIndexColumns {
		var n int
		if err := b.conn.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('threads') WHERE name = ?`, col.name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := b.conn.ExecContext(ctx, `ALTER TABLE threads ADD COLUMN `+col.name+` `+col.def); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexedThread is a thread as fillIndex reads it: its record and its
// root head's status, time, metadata and the first byte of its patch.
type indexedThread struct {
	rec  driver.ThreadRecord
	head driver.Row
	has  bool
}

// fillPage reads a page of threads after after, each with its head.
func (b *Backend) fillPage(ctx context.Context, after string) ([]indexedThread, error) {
	rows, err := b.conn.QueryContext(ctx, `SELECT t.id, t.tenant, t.metadata, t.created_at, c.status, c.created_at, c.meta, substr(c.patch, 1, 1)
		FROM threads t LEFT JOIN checkpoints c ON c.id = (SELECT max(c2.id) FROM lanes l JOIN checkpoints c2 ON c2.id BETWEEN (l.id << 32) + 1 AND (l.id << 32) + `+fmt.Sprint(maxSeq)+` WHERE l.thread = t.id AND l.ns = '')
		WHERE t.id > ? ORDER BY t.id LIMIT ?`, after, upgradePage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []indexedThread
	for rows.Next() {
		var it indexedThread
		var status, at sql.NullInt64
		if err := rows.Scan(&it.rec.ID, &it.rec.Tenant, &it.rec.Metadata, &it.rec.CreatedAt, &status, &at, &it.head.Meta, &it.head.Patch); err != nil {
			return nil, err
		}
		it.has = status.Valid
		it.head.Status, it.head.CreatedAt = store.Status(status.Int64), at.Int64
		page = append(page, it)
	}
	return page, rows.Err()
}

// fillIndex fills the thread index from the threads and their heads,
// inside the migration transaction (migration 6): each thread's status
// (ThreadStatusUnknown where an encrypted head's stop reason must be read
// with the keys: the engine's ClassifyThreads), status time and touch
// time, its metadata entries, and the counters.
func (b *Backend) fillIndex(ctx context.Context) error {
	for _, table := range indexTables {
		if _, err := b.conn.ExecContext(ctx, `DELETE FROM `+table); err != nil {
			return err
		}
	}
	if err := b.prepareIndex(ctx); err != nil {
		return err
	}
	type total struct {
		tenant string
		status store.ThreadStatus
	}
	totals := map[total]int64{}
	for after := ""; ; {
		page, err := b.fillPage(ctx, after)
		if err != nil {
			return err
		}
		for i := range page {
			it := &page[i]
			st, touched := store.ThreadIdle, it.rec.CreatedAt
			if it.has {
				var known bool
				if st, known = driver.RowThreadStatus(&it.head); !known {
					st = store.ThreadStatusUnknown
				}
				touched = it.head.CreatedAt
			}
			if _, err := b.conn.ExecContext(ctx, `UPDATE threads SET status = ?, status_at = ?, touched_at = ? WHERE id = ?`, int(st), statusAt(st, touched), touched, it.rec.ID); err != nil {
				return err
			}
			entries, err := driver.IndexEntries(it.rec.Metadata)
			if err != nil {
				return fmt.Errorf("thread %q: %w", it.rec.ID, err)
			}
			if err := b.indexEntries(ctx, it.rec, entries, 1); err != nil {
				return err
			}
			totals[total{it.rec.Tenant, st}]++
		}
		if len(page) < upgradePage {
			break
		}
		after = page[len(page)-1].rec.ID
	}
	for k, n := range totals {
		if _, err := b.ix.bumpTotal.ExecContext(ctx, k.tenant, int(k.status), n); err != nil {
			return err
		}
	}
	return nil
}
