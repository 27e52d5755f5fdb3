package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

var _ driver.ThreadLoader = (*Backend)(nil)

// LoadThread implements driver.ThreadLoader: the thread, its rows,
// pending writes, runs and their events in one transaction, sent as one
// batch after the thread's creation.
func (b *Backend) LoadThread(ctx context.Context, t driver.ThreadLoad) error {
	if err := b.writable(); err != nil {
		return err
	}
	args, err := createArgs(&t.Thread)
	if err != nil {
		return err
	}
	id := t.Thread.ID
	return b.inTx(ctx, "load thread", id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, createThreadSQL, args...)
		if err != nil {
			return wrap(err, "load thread", id)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: thread %q exists", store.ErrConflict, id)
		}
		batch := &pgx.Batch{}
		for _, r := range t.Rows {
			batch.Queue(`INSERT INTO cairn_checkpoints (thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, ext_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULLIF($14::text, ''))`,
				id, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize, int16(r.Status), r.CreatedAt, r.HasSnapshot, r.Meta, r.Patch, int64(r.Sum), r.ExternalID)
			if r.HasSnapshot {
				batch.Queue(`INSERT INTO cairn_snapshots (thread, ns, seq, data) VALUES ($1, $2, $3, $4)`, id, r.Namespace, r.Seq, r.Snapshot)
			}
			queueHead(batch, r)
		}
		for _, rw := range t.Writes {
			for _, w := range rw.Writes {
				batch.Queue(`INSERT INTO cairn_writes (thread, ns, seq, task, node, data) VALUES ($1, $2, $3, $4, $5, $6)`,
					id, rw.Namespace, rw.Seq, w.Task, w.Node, []byte(w.Update))
			}
		}
		for _, r := range t.Runs {
			batch.Queue(`INSERT INTO cairn_runs (id, thread, tenant, status, created_at, updated_at, data) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
				r.ID, id, t.Thread.Tenant, r.Status, r.CreatedAt, r.UpdatedAt, r.Data)
			for _, ev := range r.Events {
				batch.Queue(`INSERT INTO cairn_run_events (run, seq, data) VALUES ($1, $2, $3)`, r.ID, ev.Seq, ev.Data)
			}
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			if isUnique(err) {
				return fmt.Errorf("%w: thread %q: %v", store.ErrConflict, id, err)
			}
			return wrap(err, "load thread", id)
		}
		return nil
	})
}
