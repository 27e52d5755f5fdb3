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
	for _, r := range t.Rows {
		r.Create, r.NewThread, r.Fence = nil, false, 0
		if err := b.insert(ctx, c, r); err != nil {
			return err
		}
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
