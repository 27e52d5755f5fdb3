package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// The thread index (format 6): each thread's status, status time and
// touch time in columns of threads, with indexes that lead with the
// tenant; the metadata index thread_meta; the counters thread_counts (per
// metadata entry) and thread_totals (per status). Every write that
// changes them changes them in its own transaction.

// indexTables are the tables format 6 adds.
var indexTables = []string{"thread_meta", "thread_counts", "thread_totals"}

// The indexes of threads (schema.sql), by what they order; the status
// indexes hold the threads that are not idle (status_at > 0). By id, the
// primary key orders.
const (
	idxCreated  = "threads_created"   // tenant, created_at, id
	idxTouched  = "threads_touched"   // tenant, touched_at, id
	idxStatus   = "threads_status"    // tenant, status, created_at, id WHERE status_at > 0
	idxStatusAt = "threads_status_at" // tenant, status, status_at, id WHERE status_at > 0
)

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
func (b *Backend) indexThread(ctx context.Context, t store.ThreadRecord, sign int64) error {
	entries, err := store.IndexEntries(t.Metadata)
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
func (b *Backend) indexEntries(ctx context.Context, t store.ThreadRecord, entries []store.MetaEntry, sign int64) error {
	for _, e := range entries {
		st := b.ix.insertMeta
		if sign < 0 {
			st = b.ix.deleteMeta
		}
		if e.Value == store.MetaPresent {
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

// UpdateThread implements store.Backend: the metadata index follows the
// new metadata (the old entries read from the stored row, in the same
// transaction).
func (b *Backend) UpdateThread(ctx context.Context, t store.ThreadRecord) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		var old store.ThreadRecord
		err := c.QueryRowContext(ctx, `SELECT tenant, metadata, created_at FROM threads WHERE id = ?`, t.ID).Scan(&old.Tenant, &old.Metadata, &old.CreatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, t.ID)
		}
		if err != nil {
			return err
		}
		old.ID = t.ID
		before, err := store.IndexEntries(old.Metadata)
		if err != nil {
			return err
		}
		after, err := store.IndexEntries(t.Metadata)
		if err != nil {
			return err
		}
		// Nothing is written before this point, and a failure after it
		// fails the whole batch: no savepoint is needed.
		gone, added := store.DiffEntries(before, after)
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

// SetThreadStatus implements store.ThreadIndex.
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

// UnclassifiedThreads implements store.ThreadIndex.
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

// errNoIndex is the answer of a listing on a store of a format before 6
// opened read-only.
func (b *Backend) errNoIndex() error {
	return fmt.Errorf("%w: %s has no thread index (format 6): open it read-write once, or run cairn migrate up", store.ErrMigrationNeeded, b.path)
}

// IndexCounts implements store.ThreadIndex. Across tenants it sums the
// status counters and gives no metadata counts (Meta is nil).
func (b *Backend) IndexCounts(ctx context.Context, tenant string, all bool, meta []store.MetaFilter) (store.IndexCounts, error) {
	if b.noIndex {
		return store.IndexCounts{}, b.errNoIndex()
	}
	q := `SELECT status, n FROM thread_totals WHERE tenant = ?`
	args := []any{tenant}
	if all {
		q, args = `SELECT status, sum(n) FROM thread_totals GROUP BY status`, nil
	}
	rows, err := b.query(ctx, q, args...)
	if err != nil {
		return store.IndexCounts{}, b.readErr(err, "", "", 0, "thread counts")
	}
	c := store.IndexCounts{Status: map[store.ThreadStatus]int64{}}
	for rows.Next() {
		var st int
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return c, b.readErr(err, "", "", 0, "thread counts")
		}
		c.Status[store.ThreadStatus(st)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil || all {
		return c, b.readErr(err, "", "", 0, "thread counts")
	}
	c.Meta = make([]int64, len(meta))
	for i, f := range meta {
		err := b.read.QueryRowContext(ctx, `SELECT n FROM thread_counts WHERE tenant = ? AND key = ? AND value = ?`, tenant, f.Key, f.Value).Scan(&c.Meta[i])
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return c, b.readErr(err, "", "", 0, "thread counts")
		}
	}
	return c, nil
}

// ListThreads implements store.ThreadIndex: one query, which reads the
// page's ids through q.Drive's index (INDEXED BY, or the metadata index
// as the outer loop of a CROSS JOIN) and then the page's records.
func (b *Backend) ListThreads(ctx context.Context, q store.ListQuery) ([]store.ThreadRecord, error) {
	if b.noIndex {
		return nil, b.errNoIndex()
	}
	text, args := listSQL(q)
	rows, err := b.query(ctx, text, args...)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "thread list")
	}
	defer rows.Close()
	var out []store.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, b.readErr(err, r.ID, "", 0, "thread list")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), "", "", 0, "thread list")
}

// CountThreads implements store.ThreadIndex.
func (b *Backend) CountThreads(ctx context.Context, q store.ListQuery) (int64, error) {
	if b.noIndex {
		return 0, b.errNoIndex()
	}
	var w sqlWhere
	from := w.from(q)
	var n int64
	err := b.read.QueryRowContext(ctx, `SELECT count(*) `+from+w.where(q), w.args...).Scan(&n)
	return n, b.readErr(err, "", "", 0, "thread count")
}

// sqlWhere builds the FROM and WHERE of a listing; the text depends only
// on the query's shape (never on its values, which are parameters), so
// each shape is prepared once.
type sqlWhere struct {
	args []any
}

func (w *sqlWhere) p(v any) string {
	w.args = append(w.args, v)
	return "?"
}

// jsonList is a list of ids as one parameter (json_each reads it): one
// query text for any number of ids.
func jsonList(ids []string) string {
	b, _ := json.Marshal(ids) // strings always marshal
	return string(b)
}

// from is the FROM clause that reads q.Drive's index first.
func (w *sqlWhere) from(q store.ListQuery) string {
	switch q.Drive {
	case store.DriveMeta:
		if !q.AllTenants {
			return `FROM thread_meta m CROSS JOIN threads t ON t.id = m.thread WHERE m.tenant = ` + w.p(q.Tenant) + ` AND m.key = ` + w.p(q.Meta[0].Key) + ` AND m.value = ` + w.p(q.Meta[0].Value)
		}
	case store.DriveIDs:
		return `FROM threads t WHERE t.id IN (SELECT value FROM json_each(` + w.p(jsonList(q.IDs)) + `))`
	case store.DriveStatus:
		return `FROM threads t INDEXED BY ` + statusIndex(q) + ` WHERE 1`
	}
	if q.AllTenants || q.Sort == store.SortID {
		return `FROM threads t WHERE 1` // by id: the primary key
	}
	return `FROM threads t INDEXED BY ` + orderIndex(q) + ` WHERE 1`
}

// byKey reports whether a query reads threads by primary key (the ids, the
// metadata index's thread, or id order), so that their other columns are
// written +col: SQLite then uses no other index for them.
func byKey(q store.ListQuery) bool {
	return q.Drive == store.DriveIDs || (q.Drive == store.DriveMeta && !q.AllTenants) || (q.Drive == store.DriveOrder && q.Sort == store.SortID)
}

// where is the rest of the WHERE clause: every filter the drive does not
// apply. With the ids or the metadata index first, the thread's own
// columns are written +col, so that SQLite looks threads up by id and
// not through another index.
func (w *sqlWhere) where(q store.ListQuery) string {
	var sb strings.Builder
	col := "t."
	if byKey(q) {
		col = "+t."
	}
	if !q.AllTenants {
		sb.WriteString(` AND ` + col + `tenant = ` + w.p(q.Tenant))
	}
	if q.Status != nil {
		sb.WriteString(` AND ` + col + `status IN (`)
		for i, s := range q.Status {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(w.p(int(s)))
		}
		sb.WriteString(`)`)
		if !slices.Contains(q.Status, store.ThreadIdle) {
			sb.WriteString(` AND ` + col + `status_at > 0`) // the status indexes' condition
		}
	}
	for i, f := range q.Meta {
		if i == 0 && q.Drive == store.DriveMeta && !q.AllTenants {
			continue
		}
		if f.Not {
			sb.WriteString(` AND NOT EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ` + w.p(f.Key) + ` AND j.type <> 'null')`)
			continue
		}
		sb.WriteString(` AND EXISTS (SELECT 1 FROM thread_meta x WHERE x.tenant = t.tenant AND x.key = ` + w.p(f.Key) + ` AND x.value = ` + w.p(f.Value) + ` AND x.created_at = t.created_at AND x.thread = t.id)`)
	}
	if q.IDs != nil && q.Drive != store.DriveIDs {
		sb.WriteString(` AND +t.id IN (SELECT value FROM json_each(` + w.p(jsonList(q.IDs)) + `))`)
	}
	if len(q.Exclude) > 0 {
		sb.WriteString(` AND +t.id NOT IN (SELECT value FROM json_each(` + w.p(jsonList(q.Exclude)) + `))`)
	}
	return sb.String()
}

// orderIndex is the index of a listing's order within a tenant (by id:
// the primary key, which from leaves unnamed).
func orderIndex(q store.ListQuery) string {
	switch q.Sort {
	case store.SortUpdated:
		return idxTouched
	case store.SortStatusAt:
		return idxStatusAt
	}
	return idxCreated
}

// statusIndex is the status index that suits a listing's order.
func statusIndex(q store.ListQuery) string {
	if q.Sort == store.SortStatusAt {
		return idxStatusAt
	}
	return idxStatus
}

// headAt is the time of a thread's root head, or its creation time.
var headAt = `COALESCE((SELECT c.created_at ` + threadHead + `), t.created_at)`

// sortKey is the expression a listing orders by (then by id).
func sortKey(q store.ListQuery) string {
	switch q.Sort {
	case store.SortUpdated:
		return headAt
	case store.SortID:
		return "t.id"
	case store.SortStatus:
		return "t.status"
	case store.SortStatusAt:
		return "t.status_at"
	}
	if q.Drive == store.DriveMeta && !q.AllTenants {
		return "m.created_at" // the metadata index's order
	}
	return "t.created_at"
}

// listSQL is the query of a page: the ids of the page, in order, read
// through the drive's index with only their sort keys (a sort, when the
// index does not give the order, holds small rows), then the page's
// records.
func listSQL(q store.ListQuery) (string, []any) {
	var w sqlWhere
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	id := "t.id"
	if q.Drive == store.DriveMeta && !q.AllTenants {
		id = "m.thread"
	}
	// By id, the id is the key: ordering by both would sort.
	order := "k" + dir + ", id" + dir
	if q.Sort == store.SortID {
		order = "id" + dir
	}
	inner := `SELECT ` + id + ` AS id, ` + sortKey(q) + ` AS k ` + w.from(q) + w.where(q)
	if q.Sort == store.SortUpdated && q.Drive == store.DriveOrder && q.Limit > 0 && !q.AllTenants {
		inner += window(&w, q)
	}
	limit := int64(q.Limit)
	if limit == 0 {
		limit = -1
	}
	inner += ` ORDER BY ` + order + ` LIMIT ` + w.p(limit) + ` OFFSET ` + w.p(q.Offset)
	text := `SELECT ` + listColumns + ` FROM (` + inner + `) p CROSS JOIN threads t ON t.id = p.id ORDER BY p.` + strings.ReplaceAll(order, ", ", ", p.")
	return text, w.args
}

// window keeps, for a listing by head time read in touch order, the
// threads whose touch time is within q.Window of the one at the page's
// end in touch order: every thread of the page is among them (a head's
// time is within half the window of its thread's touch time).
func window(w *sqlWhere, q store.ListQuery) string {
	var probe sqlWhere
	probe.args = w.args[:0:0]
	text := `SELECT t.touched_at ` + probe.from(q) + probe.where(q)
	bound, edge, op := "-4611686018427387904", " - ", ">="
	dir := " DESC"
	if !q.Desc {
		bound, edge, op, dir = "4611686018427387904", " + ", "<=", ""
	}
	text += ` ORDER BY t.touched_at` + dir + `, t.id` + dir + ` LIMIT 1 OFFSET ` + probe.p(q.Offset+q.Limit-1)
	w.args = append(w.args, probe.args...)
	return ` AND t.touched_at ` + op + ` COALESCE((` + text + `), ` + bound + `)` + edge + w.p(q.Window)
}

// unindexThread takes a thread about to be deleted out of the metadata
// index and the counters.
func (b *Backend) unindexThread(ctx context.Context, c *sql.Conn, id string) error {
	t := store.ThreadRecord{ID: id}
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
	rec  store.ThreadRecord
	head store.Row
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
				if st, known = store.RowThreadStatus(&it.head); !known {
					st = store.ThreadStatusUnknown
				}
				touched = it.head.CreatedAt
			}
			if _, err := b.conn.ExecContext(ctx, `UPDATE threads SET status = ?, status_at = ?, touched_at = ? WHERE id = ?`, int(st), statusAt(st, touched), touched, it.rec.ID); err != nil {
				return err
			}
			entries, err := store.IndexEntries(it.rec.Metadata)
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
