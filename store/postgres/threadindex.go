package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// The thread index (format 6): each thread's status, status time and
// touch time in columns of cairn_threads, with indexes that lead with the
// tenant; the metadata index cairn_thread_meta; the counters
// cairn_thread_counts (per metadata entry) and cairn_thread_totals (per
// status), each counter spread over shards rows so that concurrent
// transactions rarely wait for one another. Every write that changes them
// changes them in its own transaction.

// shards is the number of rows each counter is spread over.
const shards = 16

// indexTables are the tables format 6 adds.
var indexTables = []string{"cairn_thread_meta", "cairn_thread_counts", "cairn_thread_totals"}

// execer runs statements on a pool or in a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// entryColumns splits metadata entries into their keys and values (the
// arrays unnest reads).
func entryColumns(entries []driver.MetaEntry) (keys, values []string) {
	keys, values = make([]string, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		keys[i], values[i] = e.Key, e.Value
	}
	return keys, values
}

// createThreadSQL inserts a thread record unless its id exists and, when
// it does insert it, its metadata entries and counters: the statement
// affects one row (the status counter) for a new thread, none for a
// thread that existed.
const createThreadSQL = `WITH ins AS (
		INSERT INTO cairn_threads (id, tenant, metadata, created_at, crc, touched_at) VALUES ($1, $2, $3::jsonb, $4::bigint, $5, $4::bigint)
		ON CONFLICT DO NOTHING RETURNING id, tenant, created_at),
	e AS (SELECT * FROM unnest($6::text[], $7::text[]) AS e(key, value)),
	m AS (INSERT INTO cairn_thread_meta (tenant, key, value, created_at, thread) SELECT ins.tenant, e.key, e.value, ins.created_at, ins.id FROM ins, e WHERE e.value <> '` + driver.MetaPresent + `'),
	c AS (INSERT INTO cairn_thread_counts (tenant, key, value, shard, n) SELECT ins.tenant, e.key, e.value, $8::smallint, 1 FROM ins, e ORDER BY e.key, e.value
		ON CONFLICT (tenant, key, value, shard) DO UPDATE SET n = cairn_thread_counts.n + 1)
	INSERT INTO cairn_thread_totals (tenant, status, shard, n) SELECT ins.tenant, 2, $8::smallint, 1 FROM ins
	ON CONFLICT (tenant, status, shard) DO UPDATE SET n = cairn_thread_totals.n + 1`

// createArgs are the arguments of createThreadSQL for a record.
func createArgs(t *driver.ThreadRecord) ([]any, error) {
	entries, err := driver.IndexEntries(t.Metadata)
	if err != nil {
		return nil, err
	}
	keys, values := entryColumns(entries)
	return []any{t.ID, t.Tenant, nullJSON(t.Metadata), t.CreatedAt, int64(t.Sum), keys, values, int16(driver.ShardOf(t.ID, shards))}, nil
}

// moveTotals ends a statement whose CTE upd returns a thread's tenant,
// its status before (was) and after (now) and its shard: the thread moves
// between the status counters.
const moveTotals = ` INSERT INTO cairn_thread_totals (tenant, status, shard, n)
	SELECT upd.tenant, v.s, upd.shard, v.d FROM upd CROSS JOIN LATERAL (VALUES (upd.was, -1::bigint), (upd.now, 1::bigint)) AS v(s, d)
	WHERE upd.was <> upd.now ORDER BY v.s
	ON CONFLICT (tenant, status, shard) DO UPDATE SET n = cairn_thread_totals.n + EXCLUDED.n`

// headSQL sets a thread's status ($4), status time ($5) and touch time
// ($6) as the root row ($2, checksum $3) its new head gives them, if that
// row was written.
const headSQL = `WITH old AS (SELECT id, tenant, status FROM cairn_threads WHERE id = $1::text
		AND EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = '' AND seq = $2::bigint AND crc = $3::bigint) FOR UPDATE),
	upd AS (UPDATE cairn_threads t SET status = $4::smallint, status_at = $5::bigint, touched_at = $6::bigint FROM old WHERE t.id = old.id
		RETURNING old.tenant, old.status AS was, t.status AS now, $7::smallint AS shard)` + moveTotals

// statusAt is the status time a status set at at stores: at for a status
// other than idle, 0 for idle (the status-time index holds only the
// threads that are not idle).
func statusAt(st store.ThreadStatus, at int64) int64 {
	if st == store.ThreadIdle {
		return 0
	}
	return at
}

// queueHead queues headSQL for a row that sets its thread's head.
func queueHead(pb *pgx.Batch, r driver.Row) bool {
	if r.Head == nil || r.Namespace != "" {
		return false
	}
	pb.Queue(headSQL, r.Thread, r.Seq, int64(r.Sum), int16(r.Head.Status), statusAt(r.Head.Status, r.CreatedAt), r.CreatedAt, int16(driver.ShardOf(r.Thread, shards)))
	return true
}

// emptiedSQL makes a thread whose root namespace has no rows left idle,
// touched at its creation (its UpdatedAt).
const emptiedSQL = `WITH old AS (SELECT id, tenant, status, created_at FROM cairn_threads WHERE id = $1::text
		AND NOT EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = '') FOR UPDATE),
	upd AS (UPDATE cairn_threads t SET status = 2, status_at = 0, touched_at = old.created_at FROM old WHERE t.id = old.id
		RETURNING old.tenant, old.status AS was, t.status AS now, $2::smallint AS shard)` + moveTotals

// classifySQL gives a thread of unknown status its status ($2) and status
// time ($3).
const classifySQL = `WITH old AS (SELECT id, tenant, status FROM cairn_threads WHERE id = $1::text AND status = 0 FOR UPDATE),
	upd AS (UPDATE cairn_threads t SET status = $2::smallint, status_at = $3::bigint FROM old WHERE t.id = old.id
		RETURNING old.tenant, old.status AS was, t.status AS now, $4::smallint AS shard)` + moveTotals

// applyEntries adds a thread's metadata entries to the index and their
// counters (sign 1), or takes them out (-1).
func applyEntries(ctx context.Context, db execer, t driver.ThreadRecord, entries []driver.MetaEntry, sign int64) error {
	if len(entries) == 0 {
		return nil
	}
	keys, values := entryColumns(entries)
	shard := int16(driver.ShardOf(t.ID, shards))
	if sign > 0 {
		if _, err := db.Exec(ctx, `INSERT INTO cairn_thread_meta (tenant, key, value, created_at, thread)
			SELECT $1, e.key, e.value, $2, $3 FROM unnest($4::text[], $5::text[]) AS e(key, value) WHERE e.value <> '`+driver.MetaPresent+`' ON CONFLICT DO NOTHING`, t.Tenant, t.CreatedAt, t.ID, keys, values); err != nil {
			return err
		}
	} else if _, err := db.Exec(ctx, `DELETE FROM cairn_thread_meta WHERE tenant = $1 AND created_at = $2 AND thread = $3
		AND (key, value) IN (SELECT * FROM unnest($4::text[], $5::text[]))`, t.Tenant, t.CreatedAt, t.ID, keys, values); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `INSERT INTO cairn_thread_counts (tenant, key, value, shard, n)
		SELECT $1, e.key, e.value, $2, $3 FROM unnest($4::text[], $5::text[]) AS e(key, value) ORDER BY e.key, e.value
		ON CONFLICT (tenant, key, value, shard) DO UPDATE SET n = cairn_thread_counts.n + EXCLUDED.n`, t.Tenant, shard, sign, keys, values); err != nil {
		return err
	}
	if sign < 0 {
		_, err := db.Exec(ctx, `DELETE FROM cairn_thread_counts WHERE tenant = $1 AND shard = $2 AND n <= 0
			AND (key, value) IN (SELECT * FROM unnest($3::text[], $4::text[]))`, t.Tenant, shard, keys, values)
		return err
	}
	return nil
}

// lockThread reads a thread's record for an update of it (its row
// locked); false when there is none.
func lockThread(ctx context.Context, tx pgx.Tx, id string) (driver.ThreadRecord, bool, error) {
	t := driver.ThreadRecord{ID: id}
	var meta *string
	var st int16
	err := tx.QueryRow(ctx, `SELECT tenant, metadata::text, created_at, status FROM cairn_threads WHERE id = $1 FOR UPDATE`, id).Scan(&t.Tenant, &meta, &t.CreatedAt, &st)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if meta != nil {
		t.Metadata = []byte(*meta)
	}
	t.Status = store.ThreadStatus(st)
	return t, err == nil, err
}

// unindexThread takes a thread about to be deleted out of the metadata
// index and the counters, in tx.
func unindexThread(ctx context.Context, tx pgx.Tx, id string) error {
	t, ok, err := lockThread(ctx, tx, id)
	if err != nil || !ok {
		return err
	}
	entries, err := driver.IndexEntries(t.Metadata)
	if err != nil {
		return err
	}
	if err := applyEntries(ctx, tx, t, entries, -1); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE cairn_thread_totals SET n = n - 1 WHERE tenant = $1 AND status = $2 AND shard = $3`, t.Tenant, int16(t.Status), int16(driver.ShardOf(id, shards)))
	return err
}

// UpdateThread implements driver.Backend: the metadata index follows the
// new metadata (the old entries read from the stored row, locked, in the
// same transaction).
func (b *Backend) UpdateThread(ctx context.Context, t driver.ThreadRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	after, err := driver.IndexEntries(t.Metadata)
	if err != nil {
		return err
	}
	err = retryDeadlock(func() error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return updateThread(ctx, tx, t, after) })
	})
	return wrap(err, "update", t.ID)
}

// retryDeadlock runs a transaction again when PostgreSQL broke a deadlock
// by aborting it (a group commit holds the rows of several threads and
// counters at once; a lone change of one thread is the one to retry).
func retryDeadlock(fn func() error) error {
	var pe *pgconn.PgError
	for try := 0; ; try++ {
		err := fn()
		if try == 2 || !errors.As(err, &pe) || pe.Code != "40P01" {
			return err
		}
	}
}

// updateThread replaces a thread's metadata and moves its index entries,
// in tx.
func updateThread(ctx context.Context, tx pgx.Tx, t driver.ThreadRecord, after []driver.MetaEntry) error {
	old, ok, err := lockThread(ctx, tx, t.ID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: thread %q", store.ErrNotFound, t.ID)
	}
	before, err := driver.IndexEntries(old.Metadata)
	if err != nil {
		return err
	}
	gone, added := driver.DiffEntries(before, after)
	if err := applyEntries(ctx, tx, old, gone, -1); err != nil {
		return err
	}
	if err := applyEntries(ctx, tx, old, added, 1); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE cairn_threads SET metadata = $1::jsonb, crc = $2 WHERE id = $3`, nullJSON(t.Metadata), int64(t.Sum), t.ID)
	return err
}

// SetThreadStatus implements driver.ThreadIndex.
func (b *Backend) SetThreadStatus(ctx context.Context, id string, st store.ThreadStatus, at int64) error {
	if err := b.writable(); err != nil {
		return err
	}
	if !st.Valid() {
		return fmt.Errorf("%w: thread status %d", store.ErrInvalidArgument, st)
	}
	_, err := b.pool.Exec(ctx, classifySQL, id, int16(st), statusAt(st, at), int16(driver.ShardOf(id, shards)))
	return wrap(err, "classify", id)
}

// UnclassifiedThreads implements driver.ThreadIndex.
func (b *Backend) UnclassifiedThreads(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := b.pool.Query(ctx, `SELECT id FROM cairn_threads WHERE id > $1 AND status = 0 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, wrap(err, "thread list", after)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap(err, "thread list", after)
}

// IndexCounts implements driver.ThreadIndex: each counter is the sum of
// its shards. Across tenants it sums the status counters and gives no
// metadata counts (Meta is nil).
func (b *Backend) IndexCounts(ctx context.Context, tenant string, all bool, meta []driver.MetaFilter) (driver.IndexCounts, error) {
	q, args := `SELECT status, sum(n)::bigint FROM cairn_thread_totals WHERE tenant = $1 GROUP BY status`, []any{tenant}
	if all {
		q, args = `SELECT status, sum(n)::bigint FROM cairn_thread_totals GROUP BY status`, nil
	}
	rows, err := b.pool.Query(ctx, q, args...)
	if err != nil {
		return driver.IndexCounts{}, wrap(err, "thread counts", "")
	}
	c := driver.IndexCounts{Status: map[store.ThreadStatus]int64{}}
	for rows.Next() {
		var st int16
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return c, wrap(err, "thread counts", "")
		}
		c.Status[store.ThreadStatus(st)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil || all {
		return c, wrap(err, "thread counts", "")
	}
	c.Meta = make([]int64, len(meta))
	for i, f := range meta {
		if err := b.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM cairn_thread_counts WHERE tenant = $1 AND key = $2 AND value = $3`, tenant, f.Key, f.Value).Scan(&c.Meta[i]); err != nil {
			return c, wrap(err, "thread counts", "")
		}
	}
	return c, nil
}

// ListThreads implements driver.ThreadIndex: one query that reads the
// page's ids (with their sort keys) through the indexes, then the page's
// records. PostgreSQL's planner chooses the indexes; the query's shape
// follows q.Drive (the metadata index joined first for DriveMeta).
func (b *Backend) ListThreads(ctx context.Context, q driver.ListQuery) ([]driver.ThreadRecord, error) {
	text, args := listSQL(q)
	rows, err := b.pool.Query(ctx, text, args...)
	if err != nil {
		return nil, wrap(err, "thread list", "")
	}
	defer rows.Close()
	var out []driver.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, wrap(err, "thread list", r.ID)
		}
		out = append(out, r)
	}
	return out, wrap(rows.Err(), "thread list", "")
}

// CountThreads implements driver.ThreadIndex.
func (b *Backend) CountThreads(ctx context.Context, q driver.ListQuery) (int64, error) {
	var w pgWhere
	from := w.from(q)
	var n int64
	err := b.pool.QueryRow(ctx, `SELECT count(*) `+from+w.where(q), w.args...).Scan(&n)
	return n, wrap(err, "thread count", "")
}

// pgWhere builds the FROM and WHERE of a listing, values as parameters.
type pgWhere struct {
	args []any
}

func (w *pgWhere) p(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func metaDriven(q driver.ListQuery) bool { return q.Drive == driver.DriveMeta && !q.AllTenants }

// from is the FROM clause: the metadata index joined first for
// DriveMeta, the ids for DriveIDs.
func (w *pgWhere) from(q driver.ListQuery) string {
	switch {
	case metaDriven(q):
		return `FROM cairn_thread_meta m JOIN cairn_threads t ON t.id = m.thread WHERE m.tenant = ` + w.p(q.Tenant) + ` AND m.key = ` + w.p(q.Meta[0].Key) + ` AND m.value = ` + w.p(q.Meta[0].Value)
	case q.Drive == driver.DriveIDs:
		return `FROM cairn_threads t WHERE t.id = ANY(` + w.p(q.IDs) + `::text[])`
	}
	return `FROM cairn_threads t WHERE true`
}

// where is the rest of the WHERE clause: every filter the FROM does not
// apply.
func (w *pgWhere) where(q driver.ListQuery) string {
	var sb strings.Builder
	if !q.AllTenants {
		sb.WriteString(` AND t.tenant = ` + w.p(q.Tenant))
	}
	switch {
	case len(q.Status) == 1:
		sb.WriteString(` AND t.status = ` + w.p(int16(q.Status[0])) + `::smallint`)
	case q.Status != nil:
		st := make([]int16, len(q.Status))
		for i, s := range q.Status {
			st[i] = int16(s)
		}
		sb.WriteString(` AND t.status = ANY(` + w.p(st) + `::smallint[])`)
	}
	if q.Status != nil && !slices.Contains(q.Status, store.ThreadIdle) {
		sb.WriteString(` AND t.status_at > 0`) // the status indexes' condition
	}
	for i, f := range q.Meta {
		if i == 0 && metaDriven(q) {
			continue
		}
		if f.Not {
			sb.WriteString(` AND coalesce(t.metadata -> ` + w.p(f.Key) + `::text, 'null'::jsonb) = 'null'::jsonb`)
			continue
		}
		sb.WriteString(` AND EXISTS (SELECT 1 FROM cairn_thread_meta x WHERE x.tenant = t.tenant AND x.key = ` + w.p(f.Key) + ` AND x.value = ` + w.p(f.Value) + ` AND x.created_at = t.created_at AND x.thread = t.id)`)
	}
	if q.IDs != nil && q.Drive != driver.DriveIDs {
		sb.WriteString(` AND t.id = ANY(` + w.p(q.IDs) + `::text[])`)
	}
	if len(q.Exclude) > 0 {
		sb.WriteString(` AND NOT (t.id = ANY(` + w.p(q.Exclude) + `::text[]))`)
	}
	return sb.String()
}

// headAt is the time of a thread's root head, or its creation time.
const headAt = `COALESCE((SELECT c.created_at FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), t.created_at)`

// sortKey is the expression a listing orders by (then by id).
func sortKey(q driver.ListQuery) string {
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
	if metaDriven(q) {
		return "m.created_at" // the metadata index's order
	}
	return "t.created_at"
}

// listSQL is the query of a page: the page's ids in order, read with only
// their sort keys, then the page's records.
func listSQL(q driver.ListQuery) (string, []any) {
	var w pgWhere
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	id := "t.id"
	if metaDriven(q) {
		id = "m.thread"
	}
	// By id, the id is the key: ordering by both would sort.
	order := "k" + dir + ", id" + dir
	if q.Sort == store.SortID {
		order = "id" + dir
	}
	inner := `SELECT ` + id + ` AS id, ` + sortKey(q) + ` AS k ` + w.from(q) + w.where(q)
	if q.Sort == store.SortUpdated && q.Drive == driver.DriveOrder && q.Limit > 0 && !q.AllTenants {
		inner += window(&w, q)
	}
	var limit any
	if q.Limit > 0 {
		limit = int64(q.Limit)
	}
	inner += ` ORDER BY ` + order + ` LIMIT ` + w.p(limit) + `::bigint OFFSET ` + w.p(int64(q.Offset))
	text := `SELECT ` + threadColumns + `, t.crc, t.status FROM (` + inner + `) p JOIN cairn_threads t ON t.id = p.id ORDER BY p.` + strings.ReplaceAll(order, ", ", ", p.")
	return text, w.args
}

// window keeps, for a listing by head time read in touch order, the
// threads whose touch time is within q.Window of the one at the page's
// end in touch order (driver.ListQuery.Window).
func window(w *pgWhere, q driver.ListQuery) string {
	probe := pgWhere{args: w.args}
	text := `SELECT t.touched_at ` + probe.from(q) + probe.where(q)
	bound, edge, op, dir := "-4611686018427387904", " - ", ">=", " DESC"
	if !q.Desc {
		bound, edge, op, dir = "4611686018427387904", " + ", "<=", ""
	}
	text += ` ORDER BY t.touched_at` + dir + `, t.id` + dir + ` LIMIT 1 OFFSET ` + probe.p(int64(q.Offset+q.Limit-1))
	w.args = probe.args
	return ` AND t.touched_at ` + op + ` COALESCE((` + text + `), ` + bound + `)` + edge + w.p(q.Window) + `::bigint`
}

// fillIndex fills the thread index from the threads and their heads,
// inside the migration transaction (migration 6); see the SQLite
// backend's, which this follows.
func fillIndex(ctx context.Context, tx pgx.Tx) error {
	for _, table := range indexTables {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table); err != nil {
			return err
		}
	}
	type total struct {
		tenant string
		status store.ThreadStatus
		shard  int16
	}
	totals := map[total]int64{}
	for after := ""; ; {
		page, err := fillPage(ctx, tx, after)
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
			if _, err := tx.Exec(ctx, `UPDATE cairn_threads SET status = $1, status_at = $2, touched_at = $3 WHERE id = $4`, int16(st), statusAt(st, touched), touched, it.rec.ID); err != nil {
				return err
			}
			entries, err := driver.IndexEntries(it.rec.Metadata)
			if err != nil {
				return fmt.Errorf("thread %q: %w", it.rec.ID, err)
			}
			if err := applyEntries(ctx, tx, it.rec, entries, 1); err != nil {
				return err
			}
			totals[total{it.rec.Tenant, st, int16(driver.ShardOf(it.rec.ID, shards))}]++
		}
		if len(page) < 512 {
			break
		}
		after = page[len(page)-1].rec.ID
	}
	for k, n := range totals {
		if _, err := tx.Exec(ctx, `INSERT INTO cairn_thread_totals (tenant, status, shard, n) VALUES ($1, $2, $3, $4)`, k.tenant, int16(k.status), k.shard, n); err != nil {
			return err
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

func fillPage(ctx context.Context, tx pgx.Tx, after string) ([]indexedThread, error) {
	rows, err := tx.Query(ctx, `SELECT t.id, t.tenant, t.metadata::text, t.created_at, c.status, c.created_at, c.meta, substr(c.patch, 1, 1)
		FROM cairn_threads t LEFT JOIN LATERAL (SELECT status, created_at, meta, patch FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1) c ON true
		WHERE t.id > $1 ORDER BY t.id LIMIT 512`, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []indexedThread
	for rows.Next() {
		var it indexedThread
		var meta *string
		var status *int16
		var at *int64
		if err := rows.Scan(&it.rec.ID, &it.rec.Tenant, &meta, &it.rec.CreatedAt, &status, &at, &it.head.Meta, &it.head.Patch); err != nil {
			return nil, err
		}
		if meta != nil {
			it.rec.Metadata = []byte(*meta)
		}
		if it.has = status != nil; it.has {
			it.head.Status, it.head.CreatedAt = store.Status(*status), *at
		}
		page = append(page, it)
	}
	return page, rows.Err()
}
