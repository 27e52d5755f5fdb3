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
	"github.com/cairn-dev/cairn/store/driver"
)

// The indexes of threads (schema.sql), by what they order; the status
// indexes hold the threads that are not idle (status_at > 0). By id, the
// primary key orders.
const (
	idxCreated  = "threads_created"   // tenant, created_at, id
	idxTouched  = "threads_touched"   // tenant, touched_at, id
	idxStatus   = "threads_status"    // tenant, status, created_at, id WHERE status_at > 0
	idxStatusAt = "threads_status_at" // tenant, status, status_at, id WHERE status_at > 0
)

// errNoIndex is the answer of a listing on a store of a format before 6
// opened read-only.
func (b *Backend) errNoIndex() error {
	return fmt.Errorf("%w: %s has no thread index (format 6): open it read-write once, or run cairn migrate up", store.ErrMigrationNeeded, b.path)
}

// IndexCounts implements driver.ThreadIndex. Across tenants it sums the
// status counters and gives no metadata counts (Meta is nil).
func (b *Backend) IndexCounts(ctx context.Context, tenant string, all bool, meta []driver.MetaFilter) (driver.IndexCounts, error) {
	if b.noIndex {
		return driver.IndexCounts{}, b.errNoIndex()
	}
	q := `SELECT status, n FROM thread_totals WHERE tenant = ?`
	args := []any{tenant}
	if all {
		q, args = `SELECT status, sum(n) FROM thread_totals GROUP BY status`, nil
	}
	rows, err := b.query(ctx, q, args...)
	if err != nil {
		return driver.IndexCounts{}, b.readErr(err, "", "", 0, "thread counts")
	}
	c := driver.IndexCounts{Status: map[store.ThreadStatus]int64{}}
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

// ListThreads implements driver.ThreadIndex: one query, which reads the
// page's ids through q.Drive's index (INDEXED BY, or the metadata index
// as the outer loop of a CROSS JOIN) and then the page's records.
func (b *Backend) ListThreads(ctx context.Context, q driver.ListQuery) ([]driver.ThreadRecord, error) {
	if b.noIndex {
		return nil, b.errNoIndex()
	}
	text, args := listSQL(q)
	rows, err := b.query(ctx, text, args...)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "thread list")
	}
	defer rows.Close()
	var out []driver.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, b.readErr(err, r.ID, "", 0, "thread list")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), "", "", 0, "thread list")
}

// CountThreads implements driver.ThreadIndex.
func (b *Backend) CountThreads(ctx context.Context, q driver.ListQuery) (int64, error) {
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
func (w *sqlWhere) from(q driver.ListQuery) string {
	switch q.Drive {
	case driver.DriveMeta:
		if !q.AllTenants {
			return `FROM thread_meta m CROSS JOIN threads t ON t.id = m.thread WHERE m.tenant = ` + w.p(q.Tenant) + ` AND m.key = ` + w.p(q.Meta[0].Key) + ` AND m.value = ` + w.p(q.Meta[0].Value)
		}
	case driver.DriveIDs:
		return `FROM threads t WHERE t.id IN (SELECT value FROM json_each(` + w.p(jsonList(q.IDs)) + `))`
	case driver.DriveStatus:
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
func byKey(q driver.ListQuery) bool {
	return q.Drive == driver.DriveIDs || (q.Drive == driver.DriveMeta && !q.AllTenants) || (q.Drive == driver.DriveOrder && q.Sort == store.SortID)
}

// where is the rest of the WHERE clause: every filter the drive does not
// apply. With the ids or the metadata index first, the thread's own
// columns are written +col, so that SQLite looks threads up by id and
// not through another index.
func (w *sqlWhere) where(q driver.ListQuery) string {
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
		if i == 0 && q.Drive == driver.DriveMeta && !q.AllTenants {
			continue
		}
		if f.Not {
			sb.WriteString(` AND NOT EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ` + w.p(f.Key) + ` AND j.type <> 'null')`)
			continue
		}
		sb.WriteString(` AND EXISTS (SELECT 1 FROM thread_meta x WHERE x.tenant = t.tenant AND x.key = ` + w.p(f.Key) + ` AND x.value = ` + w.p(f.Value) + ` AND x.created_at = t.created_at AND x.thread = t.id)`)
	}
	if q.IDs != nil && q.Drive != driver.DriveIDs {
		sb.WriteString(` AND +t.id IN (SELECT value FROM json_each(` + w.p(jsonList(q.IDs)) + `))`)
	}
	if len(q.Exclude) > 0 {
		sb.WriteString(` AND +t.id NOT IN (SELECT value FROM json_each(` + w.p(jsonList(q.Exclude)) + `))`)
	}
	return sb.String()
}

// orderIndex is the index of a listing's order within a tenant (by id:
// the primary key, which from leaves unnamed).
func orderIndex(q driver.ListQuery) string {
	switch q.Sort {
	case store.SortUpdated:
		return idxTouched
	case store.SortStatusAt:
		return idxStatusAt
	}
	return idxCreated
}

// statusIndex is the status index that suits a listing's order.
func statusIndex(q driver.ListQuery) string {
	if q.Sort == store.SortStatusAt {
		return idxStatusAt
	}
	return idxStatus
}

// headAt is the time of a thread's root head, or its creation time.
var headAt = `COALESCE((SELECT c.created_at ` + threadHead + `), t.created_at)`

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
	if q.Drive == driver.DriveMeta && !q.AllTenants {
		return "m.created_at" // the metadata index's order
	}
	return "t.created_at"
}

// listSQL is the query of a page: the ids of the page, in order, read
// through the drive's index with only their sort keys (a sort, when the
// index does not give the order, holds small rows), then the page's
// records.
func listSQL(q driver.ListQuery) (string, []any) {
	var w sqlWhere
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	id := "t.id"
	if q.Drive == driver.DriveMeta && !q.AllTenants {
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
func window(w *sqlWhere, q driver.ListQuery) string {
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
