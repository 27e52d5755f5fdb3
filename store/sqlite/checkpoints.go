package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	sqlite3 "modernc.org/sqlite/lib"
)

// Insert implements driver.Backend.
func (b *Backend) Insert(ctx context.Context, r driver.Row) error {
	if r.Seq < 1 || r.Seq > maxSeq || r.Parent < 0 || r.Parent >= r.Seq {
		return fmt.Errorf("%w: thread %q namespace %q: checkpoint %d on parent %d: a SQLite store holds checkpoints 1 to %d, each after its parent", store.ErrInvalidArgument, r.Thread, r.Namespace, r.Seq, r.Parent, maxSeq)
	}
	return b.doSized(ctx, len(r.Patch)+len(r.Meta)+len(r.Snapshot), func(ctx context.Context, c *sql.Conn) error {
		if r.NewThread {
			// The thread and its first row commit together or not at all.
			return savepoint(ctx, c, func() error { return b.insert(ctx, c, r) })
		}
		return b.insert(ctx, c, r)
	})
}

// insert runs the statements of Insert inside the batch transaction.
func (b *Backend) insert(ctx context.Context, c *sql.Conn, r driver.Row) error {
	if err := checkFence(ctx, c, r); err != nil {
		return err
	}
	if err := b.createThread(ctx, c, r); err != nil {
		return err
	}
	if r.Parent == 0 {
		// A lane's first row: the lane may be new.
		if _, err := b.ensureLane.ExecContext(ctx, r.Thread, r.Namespace); err != nil {
			return err
		}
	}
	has := 0
	if r.HasSnapshot {
		has = 1
	}
	patch := r.Patch
	if patch == nil {
		patch = []byte{} // NULL means a missing parent
	}
	_, err := b.insertRow.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize,
		int(r.Status), r.CreatedAt, has, nullBytes(r.Meta), patch, int64(r.Sum), nullString(r.ExternalID))
	switch {
	case sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d to extend", store.ErrConflict, r.Thread, r.Namespace, r.Parent)
	case isConstraint(err):
		return fmt.Errorf("%w: thread %q namespace %q seq %d exists", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
	case err != nil:
		return err
	}
	if r.HasSnapshot {
		if _, err := b.insertSnap.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
			return err
		}
	}
	if err := putWrites(ctx, c, r.Thread, r.Namespace, r.WritesAt, r.Writes); err != nil {
		return err
	}
	if r.Head != nil && r.Namespace == "" {
		return b.setHead(ctx, r.Thread, r.Head.Status, r.CreatedAt, true)
	}
	return nil
}

// AttachSnapshot implements driver.SnapshotAttacher: the row's new
// bookkeeping and its snapshot, in the writer's next transaction.
func (b *Backend) AttachSnapshot(ctx context.Context, r driver.Row, old uint32) (bool, error) {
	var ok bool
	err := b.doSized(ctx, len(r.Snapshot), func(ctx context.Context, c *sql.Conn) error {
		res, err := b.attachRow.ExecContext(ctx, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(old))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if _, err := b.insertSnap.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}

// createThread creates the thread record a first row carries.
func (b *Backend) createThread(ctx context.Context, c *sql.Conn, r driver.Row) error {
	t := r.Create
	if t == nil || r.Seq != 1 {
		return nil
	}
	res, err := b.ensureThread.ExecContext(ctx, t.ID, t.Tenant, nullBytes(t.Metadata), t.CreatedAt, int64(t.Sum))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if r.NewThread {
			return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
		}
		return nil
	}
	return b.indexThread(ctx, *t, 1)
}

// laneKey is the SQL of the first key of a thread namespace's lane, lane
// << 32, the lane looked up by the parameters named thread and ns; when the
// namespace has no lane, -1 << 32, below every key.
func laneKey(thread, ns string) string {
	return `(coalesce((SELECT id FROM lanes WHERE thread = ` + thread + ` AND ns = ` + ns + `), -1) << 32)`
}

// laneRows is the SQL of a lane's rows, between seq from and to
// (parameter names), for a query on checkpoints c joined to lanes l.
func laneRows(from, to string) string {
	return `c.id BETWEEN (l.id << 32) + ` + from + ` AND (l.id << 32) + ` + to
}

// maxSeq is the largest seq a lane holds: a row's key is lane << 32 | seq.
const maxSeq = 1<<32 - 1

// inLane is the SQL that joins a lane l to all its rows c.
var inLane = laneRows("1", strconv.Itoa(maxSeq))

// DeleteRanges implements driver.Backend.
func (b *Backend) DeleteRanges(ctx context.Context, thread, ns string, head int64, ranges []driver.SeqRange, rebase []driver.Rebase) (int64, error) {
	var n int64
	size := 0
	for _, rb := range rebase {
		size += len(rb.Row.Snapshot)
	}
	err := b.doSized(ctx, size, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			var newest sql.NullInt64
			if err := c.QueryRowContext(ctx, `SELECT max(c.id) - (l.id << 32) FROM lanes l JOIN checkpoints c ON `+inLane+` WHERE l.thread = ? AND l.ns = ?`, thread, ns).Scan(&newest); err != nil {
				return err
			}
			if newest.Int64 != head {
				return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d, now %d)", store.ErrConflict, thread, ns, head, newest.Int64)
			}
			if err := b.rebase(ctx, c, rebase); err != nil {
				return err
			}
			for _, r := range ranges {
				res, err := c.ExecContext(ctx, `DELETE FROM checkpoints WHERE id BETWEEN `+laneKey("?1", "?2")+` + ?3 AND `+laneKey("?1", "?2")+` + ?4`, thread, ns, max(r.From, 1), min(r.To, maxSeq))
				if err != nil {
					return err
				}
				k, _ := res.RowsAffected()
				n += k
				for _, table := range []string{"snapshots", "writes"} {
					if _, err := c.ExecContext(ctx, `DELETE FROM `+table+` WHERE thread = ? AND ns = ? AND seq BETWEEN ? AND ?`, thread, ns, r.From, r.To); err != nil {
						return err
					}
				}
			}
			if ns == "" {
				return b.rootEmptied(ctx, c, thread)
			}
			return nil
		})
	})
	return n, err
}

// rebase rewrites the kept rows of a prune (driver.Rebase), inside its
// transaction: a row changed since it was read fails the prune.
func (b *Backend) rebase(ctx context.Context, c *sql.Conn, rebase []driver.Rebase) error {
	for _, rb := range rebase {
		r, has := rb.Row, 0
		if r.HasSnapshot {
			has = 1
		}
		res, err := c.ExecContext(ctx, `UPDATE checkpoints SET has_snapshot = ?, base = ?, since = ?, base_size = ?, crc = ?
			WHERE id = `+laneKey("?", "?")+` + ? AND crc = ?`, has, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(rb.Old))
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: thread %q namespace %q checkpoint %d changed while it was pruned", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
		}
		if r.HasSnapshot && r.Snapshot != nil {
			if _, err := c.ExecContext(ctx, `INSERT OR REPLACE INTO snapshots (thread, ns, seq, data) VALUES (?,?,?,?)`, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
				return err
			}
		}
	}
	return nil
}
