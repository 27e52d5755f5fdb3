package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// Rebasing. A prune keeps the newest N checkpoints of a branch and
// deletes the rest, also the snapshot the kept ones replayed from: the
// oldest kept checkpoint of the branch (its root) is given the snapshot of
// its own state, and the kept rows that replayed from below it replay from
// it (Rebase), in the transaction of the deletion. A writer that still
// holds the old bookkeeping of a row the prune rewrote — its own last
// commit, cached, in this process or another — would write a row naming a
// deleted base: the backend refuses that row (BaseFits), and insertOn
// writes it again on the parent as stored.

// rebaseRows builds the rewrites of a prune's rebase plan (kept row → the
// row it is to replay from): stored holds the namespace's rows as stored,
// rows the same opened (both ascending by seq). It returns them with the
// count and size of the snapshots it wrote in out.
func (e *Engine) rebaseRows(ctx context.Context, stored, rows []driver.Row, plan map[int64]int64) ([]driver.Rebase, nsPruned, error) {
	var out nsPruned
	if len(plan) == 0 {
		return nil, out, nil
	}
	// since: the patch bytes from the last snapshot below a row on its
	// branch to the row (what a row's Since counts from its base);
	// baseSize: a snapshot's size.
	since := map[int64]int64{}
	baseSize := map[int64]int64{}
	var rebase []driver.Rebase
	for i := range rows {
		r := &rows[i]
		to, ok := plan[r.Seq]
		switch {
		case !ok && r.HasSnapshot:
			baseSize[r.Seq] = r.BaseSize
			continue
		case !ok:
			since[r.Seq] = since[r.Parent] + int64(len(r.Patch))
			continue
		}
		nw := stored[i]
		if to == r.Seq {
			snap, err := e.rootSnapshot(ctx, r)
			if err != nil {
				return nil, out, err
			}
			nw.HasSnapshot, nw.Snapshot = true, snap
			nw.Base, nw.Since, nw.BaseSize = r.Seq, 0, int64(len(snap))
			baseSize[r.Seq] = nw.BaseSize
			out.rebased++
			out.rebasedBytes += nw.BaseSize
		} else {
			nw.Base, nw.Since, nw.BaseSize = to, since[r.Parent]+int64(len(r.Patch)), baseSize[to]
			since[r.Seq] = nw.Since
		}
		nw.Sum = driver.RowChecksum(&nw)
		rebase = append(rebase, driver.Rebase{Row: nw, Old: stored[i].Sum})
	}
	return rebase, out, nil
}

// rootSnapshot returns the stored snapshot blob of a kept row's state,
// sealed for that row when the store is encrypted.
func (e *Engine) rootSnapshot(ctx context.Context, r *driver.Row) ([]byte, error) {
	cp, err := e.Load(ctx, LoadRequest{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq})
	if errors.Is(err, ErrNotFound) {
		// Another prune deleted it meanwhile: plan again.
		return nil, fmt.Errorf("%w: thread %q namespace %q checkpoint %d went while it was pruned", ErrConflict, r.Thread, r.Namespace, r.Seq)
	}
	if err != nil {
		return nil, err
	}
	sealer, err := e.snapshotSealer(ctx, r.Thread, r.Namespace, r.Seq)
	if err != nil {
		return nil, err
	}
	return sealer.sealSnapshot(e.encodeSnapshot(cp.State)), nil
}

// snapshotSealer returns the sealer of the snapshot of a stored row (one
// that changes nothing without a keyring).
func (e *Engine) snapshotSealer(ctx context.Context, thread, ns string, seq int64) (rowSealer, error) {
	if e.crypt.ring == nil {
		return rowSealer{}, nil
	}
	tenant, err := e.crypt.tenant(ctx, e.b, thread, "", false)
	if err != nil {
		return rowSealer{}, err
	}
	return rowSealer{ring: e.crypt.ring, b: binding{tenant: tenant, thread: thread, ns: ns, seq: seq}}, nil
}

// insertOn is insert of a row on an existing parent, whose bookkeeping
// parent this engine holds (cached from its own commit, or read before).
// When the backend refuses the row and the parent as stored has another
// base — a prune rebased it since — the row is written once more on the
// parent as stored.
func (e *Engine) insertOn(ctx context.Context, cp Checkpoint, seq int64, parent rowInfo) (Checkpoint, error) {
	out, err := e.insert(ctx, cp, seq, parent, nil, false)
	if !errors.Is(err, ErrConflict) || cp.Parent == 0 {
		return out, err
	}
	rows, rerr := e.storedRows(ctx, driver.RowQuery{Thread: cp.Thread, Namespace: cp.Namespace, From: cp.Parent, To: cp.Parent})
	if rerr != nil || len(rows) == 0 {
		return out, err
	}
	p := rows[0]
	if parent.base == p.Base || parent.base == p.Seq {
		return out, err // the row fitted its parent: refused for another reason
	}
	e.log.Debug("parent rebased by a prune; writing on it as stored", "thread", cp.Thread, "ns", cp.Namespace, "parent", p.Seq, "base", p.Base)
	fresh := rowInfo{seq: p.Seq, base: p.Base, since: p.Since, baseSize: p.BaseSize, status: parent.status, touched: parent.touched}
	return e.insert(ctx, cp, seq, fresh, nil, false)
}

// PrunedBoundary reports whether a checkpoint whose parent is not stored
// begins what a prune left of its branch, rather than marks damage: Prune
// gives the oldest checkpoint it keeps of a branch a snapshot of its own
// state (the prunes of versions before rebasing kept every row back to a
// snapshot: their oldest kept rows have one too). A checkpoint whose
// parent is missing and that has no snapshot cannot be rebuilt.
func PrunedBoundary(cp Checkpoint) bool { return cp.Parent != 0 && cp.Snapshot }
