package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

var _ driver.ThreadLoader = (*Backend)(nil)

// LoadThread implements driver.ThreadLoader: the thread, its rows,
// pending writes, runs and their events in one savepoint of the writer's
// transaction, so that they commit together or not at all.
func (b *Backend) LoadThread(ctx context.Context, t driver.ThreadLoad) error {
	size := len(t.Thread.Metadata)
	for _, r := range t.Rows {
		if r.Seq < 1 || r.Seq > maxSeq || r.Parent < 0 || r.Parent >= r.Seq {
			return fmt.Errorf("%w: thread %q namespace %q: checkpoint %d on parent %d", store.ErrInvalidArgument, r.Thread, r.Namespace, r.Seq, r.Parent)
		}
		size += len(r.Patch) + len(r.Meta) + len(r.Snapshot)
	}
	return b.doSized(ctx, size, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error { return b.load(ctx, c, t) })
	})
}

// loadRow inserts a loaded row: unlike Insert's, its parent may be
// missing (pruned before the thread was exported), so its lane is made
// for it whatever its parent.
const loadRow = `INSERT INTO checkpoints (id, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, ext_id)
	VALUES (((SELECT id FROM lanes WHERE thread = ?1 AND ns = ?2) << 32) + ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)`

// loadRows inserts the rows of a loaded thread, their snapshots and the
// root head's status.
func (b *Backend) loadRows(ctx context.Context, c *sql.Conn, rows []driver.Row) error {
	st, err := c.PrepareContext(ctx, loadRow)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, r := range rows {
		if _, err := b.ensureLane.ExecContext(ctx, r.Thread, r.Namespace); err != nil {
			return err
		}
		has, patch := 0, r.Patch
		if r.HasSnapshot {
			has = 1
		}
		if patch == nil {
			patch = []byte{}
		}
		if _, err := st.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize,
			int(r.Status), r.CreatedAt, has, nullBytes(r.Meta), patch, int64(r.Sum), nullString(r.ExternalID)); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: thread %q namespace %q seq %d exists", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
			}
			return err
		}
		if r.HasSnapshot {
			if _, err := b.insertSnap.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
				return err
			}
		}
		if r.Head != nil && r.Namespace == "" {
			if err := b.setHead(ctx, r.Thread, r.Head.Status, r.CreatedAt, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// load runs the statements of LoadThread.
func (b *Backend) load(ctx context.Context, c *sql.Conn, t driver.ThreadLoad) error {
	th := t.Thread
	res, err := b.ensureThread.ExecContext(ctx, th.ID, th.Tenant, nullBytes(th.Metadata), th.CreatedAt, int64(th.Sum))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, th.ID)
	}
	if err := b.indexThread(ctx, th, 1); err != nil {
		return err
	}
	if err := b.loadRows(ctx, c, t.Rows); err != nil {
		return err
	}
	for _, rw := range t.Writes {
		for _, w := range rw.Writes {
			if _, err := c.ExecContext(ctx, `INSERT INTO writes (thread, ns, seq, task, node, data) VALUES (?,?,?,?,?,?)`,
				th.ID, rw.Namespace, rw.Seq, w.Task, w.Node, []byte(w.Update)); err != nil {
				return err
			}
		}
	}
	for _, r := range t.Runs {
		if _, err := c.ExecContext(ctx, `INSERT INTO runs (id, thread, tenant, status, created_at, updated_at, data) VALUES (?,?,?,?,?,?,?)`,
			r.ID, th.ID, th.Tenant, r.Status, r.CreatedAt, r.UpdatedAt, r.Data); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: run %q exists", store.ErrConflict, r.ID)
			}
			return err
		}
		for _, ev := range r.Events {
			if _, err := c.ExecContext(ctx, `INSERT INTO run_events (run, seq, data) VALUES (?,?,?)`, r.ID, ev.Seq, ev.Data); err != nil {
				return err
			}
		}
	}
	return nil
}
