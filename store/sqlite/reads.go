package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// query runs a read through a statement prepared once per query text (the
// texts are a small fixed set built from flags, never from values).
func (b *Backend) query(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, ok := b.stmts.Load(text)
	if !ok {
		if err := b.prepare(ctx, text); err != nil {
			return nil, err
		}
		st, _ = b.stmts.Load(text)
	}
	return st.(*sql.Stmt).QueryContext(ctx, args...)
}

func (b *Backend) prepare(ctx context.Context, text string) error {
	if _, ok := b.stmts.Load(text); ok {
		return nil
	}
	prepared, err := b.read.PrepareContext(ctx, text)
	if err != nil {
		return err
	}
	if _, loaded := b.stmts.LoadOrStore(text, prepared); loaded {
		prepared.Close()
	}
	return nil
}

// rowsQuery builds the query text and arguments of a RowQuery. The text
// depends only on the query's flags and the file's format, so there are
// few distinct texts and each is prepared once.
func rowsQuery(q driver.RowQuery, legacy, noLanes, noExtIDs bool) (string, []any) {
	if noLanes {
		return oldRowsQuery(q, legacy)
	}
	var sb strings.Builder
	sb.WriteString(`SELECT c.id - (l.id << 32), c.parent, c.base, c.has_snapshot, c.since, c.base_size, c.status, c.created_at, c.meta, c.patch, c.crc`)
	if noExtIDs {
		sb.WriteString(`, NULL`)
	} else {
		sb.WriteString(`, c.ext_id`)
	}
	sb.WriteString(` FROM lanes l JOIN checkpoints c ON ` + laneRows("?", "?") + ` WHERE l.thread = ? AND l.ns = ?`)
	to := int64(maxSeq)
	if q.To > 0 {
		to = min(q.To, maxSeq)
	}
	args := []any{max(q.From, 1), to, q.Thread, q.Namespace}
	return orderLimit(&sb, q, "c.id", args)
}

// oldRowsQuery is rowsQuery on a file of a format before 5.
func oldRowsQuery(q driver.RowQuery, legacy bool) (string, []any) {
	var sb strings.Builder
	sb.WriteString(`SELECT c.seq, c.parent, c.base, c.has_snapshot, c.since, c.base_size, c.status, c.created_at, c.meta, c.patch`)
	if legacy {
		sb.WriteString(`, 0`)
	} else {
		sb.WriteString(`, c.crc`)
	}
	sb.WriteString(`, NULL FROM checkpoints c`)
	sb.WriteString(` WHERE c.thread = ? AND c.ns = ? AND c.seq >= ?`)
	args := []any{q.Thread, q.Namespace, q.From}
	if q.To > 0 {
		sb.WriteString(` AND c.seq <= ?`)
		args = append(args, q.To)
	}
	return orderLimit(&sb, q, "c.seq", args)
}

// orderLimit ends a rows query: its order by key and its limit.
func orderLimit(sb *strings.Builder, q driver.RowQuery, key string, args []any) (string, []any) {
	sb.WriteString(` ORDER BY ` + key)
	if q.Desc {
		sb.WriteString(` DESC`)
	}
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	return sb.String(), args
}

const snapshotsQuery = `SELECT seq, data FROM snapshots WHERE thread = ? AND ns = ? AND seq >= ? AND seq <= ?`

// prepareReads prepares the statements that loading a checkpoint uses, so
// the first load does not pay for them.
func (b *Backend) prepareReads(ctx context.Context) error {
	for _, q := range []driver.RowQuery{
		{Desc: true, Limit: 1},
		{From: 1, To: 1},
		{From: 1, To: 2},
		{To: 1, Desc: true, Limit: 1},
	} {
		text, _ := rowsQuery(q, b.legacy, b.noLanes, b.noExtIDs)
		if err := b.prepare(ctx, text); err != nil {
			return err
		}
	}
	return b.prepare(ctx, snapshotsQuery)
}

// Rows implements driver.Backend.
func (b *Backend) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	text, args := rowsQuery(q, b.legacy, b.noLanes, b.noExtIDs)
	at := q.From
	if q.To > 0 {
		at = q.To
	}
	rows, err := b.query(ctx, text, args...)
	if err != nil {
		return nil, b.readErr(err, q.Thread, q.Namespace, at, "checkpoints")
	}
	defer rows.Close()
	var out []driver.Row
	if q.Limit > 0 {
		out = make([]driver.Row, 0, q.Limit)
	}
	for rows.Next() {
		r := driver.Row{Thread: q.Thread, Namespace: q.Namespace}
		var status, has, sum int64
		var ext sql.NullString
		if err := rows.Scan(&r.Seq, &r.Parent, &r.Base, &has, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.Meta, &r.Patch, &sum, &ext); err != nil {
			return nil, b.readErr(err, q.Thread, q.Namespace, r.Seq, "checkpoint")
		}
		r.Status = store.Status(status) // an out-of-range value fails the checksum
		r.HasSnapshot = has == 1
		r.Sum, r.ExternalID = uint32(sum), ext.String
		if status != int64(r.Status) || (has != 0 && has != 1) || sum != int64(r.Sum) {
			r.Sum = ^driver.RowChecksum(&r) // what was read is not what was written
		} else if b.legacy {
			r.Sum = driver.RowChecksum(&r)
		}
		if r.Patch == nil {
			r.Patch = []byte{}
		}
		out = append(out, r)
	}
	if err := b.readErr(rows.Err(), q.Thread, q.Namespace, at, "checkpoints"); err != nil {
		return nil, err
	}
	if q.Snapshots {
		if err := b.fillSnapshots(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillSnapshots reads the snapshots of the rows that have one, in one
// range query.
func (b *Backend) fillSnapshots(ctx context.Context, q driver.RowQuery, out []driver.Row) error {
	idx := map[int64]int{}
	lo, hi := int64(-1), int64(-1)
	for i := range out {
		if out[i].HasSnapshot {
			idx[out[i].Seq] = i
			if lo < 0 || out[i].Seq < lo {
				lo = out[i].Seq
			}
			hi = max(hi, out[i].Seq)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	rows, err := b.query(ctx, snapshotsQuery, q.Thread, q.Namespace, lo, hi)
	if err != nil {
		return b.readErr(err, q.Thread, q.Namespace, lo, "snapshots")
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return b.readErr(err, q.Thread, q.Namespace, seq, "snapshot")
		}
		if i, ok := idx[seq]; ok {
			out[i].Snapshot = data
		}
	}
	return b.readErr(rows.Err(), q.Thread, q.Namespace, lo, "snapshots")
}

// Namespaces implements driver.Backend.
func (b *Backend) Namespaces(ctx context.Context, thread string) ([]driver.NamespaceRecord, error) {
	q := `SELECT l.ns, max(c.id) - (l.id << 32), count(*) FROM lanes l JOIN checkpoints c ON ` + inLane + ` WHERE l.thread = ? GROUP BY l.ns ORDER BY l.ns`
	if b.noLanes {
		q = `SELECT ns, max(seq), count(*) FROM checkpoints WHERE thread = ? GROUP BY ns ORDER BY ns`
	}
	rows, err := b.read.QueryContext(ctx, q, thread)
	if err != nil {
		return nil, b.readErr(err, thread, "", 0, "namespaces")
	}
	defer rows.Close()
	var out []driver.NamespaceRecord
	for rows.Next() {
		var r driver.NamespaceRecord
		if err := rows.Scan(&r.Name, &r.Head, &r.Count); err != nil {
			return nil, b.readErr(err, thread, "", 0, "namespaces")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), thread, "", 0, "namespaces")
}
