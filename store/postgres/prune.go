package postgres

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
)

// pruneLockClass is the first key of the advisory lock a prune holds on
// its thread (the second is a hash of the thread's id).
const pruneLockClass = "7262466"

// DeleteRanges implements driver.Backend. It checks that the namespace did
// not grow once more after it has locked the rows it rewrites and deletes:
// an insert holds a lock on its parent row until it commits (Insert), so
// one on a parent this prune changes either committed first — and that
// check sees its row — or waits, and then finds its parent changed or
// gone.
func (b *Backend) DeleteRanges(ctx context.Context, thread, ns string, head int64, ranges []driver.SeqRange, rebase []driver.Rebase) (int64, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// One prune of a thread at a time: two would lock the rows they
		// change in orders of their own. Not the thread's row: an insert
		// that holds its parent's lock may wait for that one (it moves the
		// head), and this prune for the parent.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+pruneLockClass+`, hashtext($1))`, thread); err != nil {
			return err
		}
		var newest *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM cairn_checkpoints WHERE thread = $1 AND ns = $2`, thread, ns).Scan(&newest); err != nil {
			return err
		}
		if newest == nil || *newest != head {
			return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d)", store.ErrConflict, thread, ns, head)
		}
		if err := rebaseRows(ctx, tx, rebase); err != nil {
			return err
		}
		for _, r := range ranges {
			tag, err := tx.Exec(ctx, `DELETE FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq BETWEEN $3 AND $4`, thread, ns, r.From, r.To)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
			for _, table := range []string{"cairn_snapshots", "cairn_writes"} {
				if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE thread = $1 AND ns = $2 AND seq BETWEEN $3 AND $4`, thread, ns, r.From, r.To); err != nil {
					return err
				}
			}
		}
		var grew bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq > $3)`, thread, ns, head).Scan(&grew); err != nil {
			return err
		}
		if grew {
			return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d)", store.ErrConflict, thread, ns, head)
		}
		if ns == "" {
			_, err := tx.Exec(ctx, emptiedSQL, thread, int16(driver.ShardOf(thread, shards)))
			return err
		}
		return nil
	})
	return n, wrap(err, "prune", thread)
}

// rebaseRows rewrites the kept rows of a prune (driver.Rebase), inside its
// transaction: a row changed since it was read fails the prune.
func rebaseRows(ctx context.Context, tx pgx.Tx, rebase []driver.Rebase) error {
	if len(rebase) == 0 {
		return nil
	}
	// FOR UPDATE, not the update's own lock, which an insert's FOR KEY
	// SHARE on its parent would not hold back.
	seqs := make([]int64, len(rebase))
	for i, rb := range rebase {
		seqs[i] = rb.Row.Seq
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq = ANY($3) FOR UPDATE`,
		rebase[0].Row.Thread, rebase[0].Row.Namespace, seqs); err != nil {
		return err
	}
	for _, rb := range rebase {
		r := rb.Row
		tag, err := tx.Exec(ctx, `UPDATE cairn_checkpoints SET has_snapshot = $1, base = $2, since = $3, base_size = $4, crc = $5
			WHERE thread = $6 AND ns = $7 AND seq = $8 AND crc = $9`,
			r.HasSnapshot, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(rb.Old))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: thread %q namespace %q checkpoint %d changed while it was pruned", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
		}
		if r.HasSnapshot && r.Snapshot != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO cairn_snapshots (thread, ns, seq, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT (thread, ns, seq) DO UPDATE SET data = EXCLUDED.data`, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
				return err
			}
		}
	}
	return nil
}
