package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
)

// Insert implements driver.Backend: the row, its snapshot and (for a first
// row) the thread record go in one transaction, sent as one batch. A seq
// that exists, or a parent that does not, is ErrConflict.
func (b *Backend) Insert(ctx context.Context, r driver.Row) error {
	if err := b.writable(); err != nil {
		return err
	}
	if b.group != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		return b.group.insert(r)
	}
	return b.insertOne(ctx, r)
}

// AttachSnapshot implements driver.SnapshotAttacher: the row's new
// bookkeeping and its snapshot in one transaction, sent as one batch.
func (b *Backend) AttachSnapshot(ctx context.Context, r driver.Row, old uint32) (bool, error) {
	if err := b.writable(); err != nil {
		return false, err
	}
	var ok bool
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE cairn_checkpoints SET has_snapshot = true, base = $1, since = $2, base_size = $3, crc = $4
			WHERE thread = $5 AND ns = $6 AND seq = $7 AND crc = $8`,
			r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(old))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		pb := &pgx.Batch{}
		queueSnapshot(pb, r)
		if err := tx.SendBatch(ctx, pb).Close(); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, wrap(err, "attach snapshot", r.Thread)
}

// GroupStats reports what group commit did (zero without it).
func (b *Backend) GroupStats() GroupStats {
	if b.group == nil {
		return GroupStats{}
	}
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	return b.group.stats
}

// insertOne appends a row in a transaction of its own.
func (b *Backend) insertOne(ctx context.Context, r driver.Row) error {
	return wrap(b.insertTx(ctx, r), "insert", r.Thread)
}

func (b *Backend) insertTx(ctx context.Context, r driver.Row) error {
	return b.inTx(ctx, "insert", r.Thread, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		create := r.Create != nil && r.Seq == 1
		if create {
			args, err := createArgs(r.Create)
			if err != nil {
				return err
			}
			batch.Queue(createThreadSQL, args...)
		}
		batch.Queue(`INSERT INTO cairn_checkpoints (thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, ext_id)
			SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::smallint, $9::bigint, $10::boolean, $11::bytea, $12::bytea, $13::bigint, NULLIF($15::text, '')
			WHERE ($4::bigint = 0 OR EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = $2::text AND seq = $4::bigint
				AND (base = $5::bigint OR $5::bigint IN ($3::bigint, $4::bigint)) FOR KEY SHARE))
			AND ($14::bigint = 0 OR EXISTS (SELECT 1 FROM cairn_leases WHERE thread = $1::text AND token = $14::bigint FOR SHARE))`,
			r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize, int16(r.Status), r.CreatedAt, r.HasSnapshot, r.Meta, r.Patch, int64(r.Sum), r.Fence, r.ExternalID)
		if r.HasSnapshot {
			batch.Queue(`INSERT INTO cairn_snapshots (thread, ns, seq, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT (thread, ns, seq) DO UPDATE SET data = EXCLUDED.data`, r.Thread, r.Namespace, r.Seq, r.Snapshot)
		}
		writes := queueWrites(batch, r)
		head := queueHead(batch, r)
		res := tx.SendBatch(ctx, batch)
		if create {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return wrap(err, "insert", r.Thread)
			}
			if r.NewThread && tag.RowsAffected() == 0 {
				// The transaction rolls back: nothing of the fork is written.
				res.Close()
				return fmt.Errorf("%w: thread %q exists", store.ErrConflict, r.Thread)
			}
		}
		tag, err := res.Exec()
		if err != nil {
			res.Close()
			if isUnique(err) {
				return fmt.Errorf("%w: thread %q namespace %q seq %d exists", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
			}
			return wrap(err, "insert", r.Thread)
		}
		if tag.RowsAffected() == 0 {
			res.Close()
			return b.fencedOr(ctx, r, fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d to extend", store.ErrConflict, r.Thread, r.Namespace, r.Parent))
		}
		if r.HasSnapshot {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return wrap(err, "insert snapshot", r.Thread)
			}
		}
		if writes {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return wrap(err, "pending writes", r.Thread)
			}
		}
		if head {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return wrap(err, "thread head", r.Thread)
			}
		}
		return res.Close()
	})
}

// Rows implements driver.Backend.
func (b *Backend) Rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT seq, parent, base, has_snapshot, since, base_size, status, created_at, meta, patch, crc, coalesce(ext_id, '')`)
	sb.WriteString(` FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq >= $3`)
	args := []any{q.Thread, q.Namespace, q.From}
	if q.To > 0 {
		args = append(args, q.To)
		sb.WriteString(` AND seq <= $4`)
	}
	if q.Desc {
		sb.WriteString(` ORDER BY seq DESC`)
	} else {
		sb.WriteString(` ORDER BY seq`)
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sb.WriteString(` LIMIT $` + strconv.Itoa(len(args)))
	}
	rows, err := b.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, wrap(err, "checkpoints", q.Thread)
	}
	defer rows.Close()
	var out []driver.Row
	for rows.Next() {
		r := driver.Row{Thread: q.Thread, Namespace: q.Namespace}
		var status int16
		var sum int64
		if err := rows.Scan(&r.Seq, &r.Parent, &r.Base, &r.HasSnapshot, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.Meta, &r.Patch, &sum, &r.ExternalID); err != nil {
			return nil, wrap(err, "checkpoint", q.Thread)
		}
		r.Status = store.Status(status)
		r.Sum = uint32(sum)
		if r.Patch == nil {
			r.Patch = []byte{}
		}
		if int16(r.Status) != status || sum != int64(r.Sum) {
			r.Sum = ^driver.RowChecksum(&r) // what was read is not what was written
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(err, "checkpoints", q.Thread)
	}
	if q.Snapshots {
		if err := b.fillSnapshots(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *Backend) fillSnapshots(ctx context.Context, q driver.RowQuery, out []driver.Row) error {
	idx := map[int64]int{}
	var seqs []int64
	for i := range out {
		if out[i].HasSnapshot {
			idx[out[i].Seq] = i
			seqs = append(seqs, out[i].Seq)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	rows, err := b.pool.Query(ctx, `SELECT seq, data FROM cairn_snapshots WHERE thread = $1 AND ns = $2 AND seq = ANY($3)`, q.Thread, q.Namespace, seqs)
	if err != nil {
		return wrap(err, "snapshots", q.Thread)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return wrap(err, "snapshot", q.Thread)
		}
		out[idx[seq]].Snapshot = data
	}
	return wrap(rows.Err(), "snapshots", q.Thread)
}

// Namespaces implements driver.Backend.
func (b *Backend) Namespaces(ctx context.Context, thread string) ([]driver.NamespaceRecord, error) {
	rows, err := b.pool.Query(ctx, `SELECT ns, max(seq), count(*) FROM cairn_checkpoints WHERE thread = $1 GROUP BY ns ORDER BY ns COLLATE "C"`, thread)
	if err != nil {
		return nil, wrap(err, "namespaces", thread)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (driver.NamespaceRecord, error) {
		var r driver.NamespaceRecord
		err := row.Scan(&r.Name, &r.Head, &r.Count)
		return r, err
	})
	return out, wrap(err, "namespaces", thread)
}

// PutWrites implements driver.Backend.
func (b *Backend) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []store.Write) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "pending writes", thread, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cairn_threads WHERE id = $1)`, thread).Scan(&exists); err != nil {
			return wrap(err, "pending writes", thread)
		}
		if !exists {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
		}
		for _, w := range ws {
			if _, err := tx.Exec(ctx, `INSERT INTO cairn_writes (thread, ns, seq, task, node, data) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (thread, ns, seq, task) DO UPDATE SET node = EXCLUDED.node, data = EXCLUDED.data`,
				thread, ns, seq, w.Task, w.Node, []byte(w.Update)); err != nil {
				return wrap(err, "pending writes", thread)
			}
		}
		return nil
	})
}

// Writes implements driver.Backend.
func (b *Backend) Writes(ctx context.Context, thread, ns string, seq int64) ([]store.Write, error) {
	rows, err := b.pool.Query(ctx, `SELECT task, node, data FROM cairn_writes WHERE thread = $1 AND ns = $2 AND seq = $3 ORDER BY task`, thread, ns, seq)
	if err != nil {
		return nil, wrap(err, "pending writes", thread)
	}
	defer rows.Close()
	var out []store.Write
	for rows.Next() {
		var w store.Write
		var data []byte
		if err := rows.Scan(&w.Task, &w.Node, &data); err != nil {
			return nil, wrap(err, "pending writes", thread)
		}
		w.Update = data
		out = append(out, w)
	}
	return out, wrap(rows.Err(), "pending writes", thread)
}
