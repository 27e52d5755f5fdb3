package store

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// rows reads rows from the backend, checks each against its checksum and
// opens their blobs.
func (e *Engine) rows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	rows, err := e.storedRows(ctx, q)
	if err != nil {
		return nil, err
	}
	if err := e.openRows(ctx, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// storedRows reads rows from the backend and checks each against its
// checksum; their blobs stay as stored.
func (e *Engine) storedRows(ctx context.Context, q driver.RowQuery) ([]driver.Row, error) {
	rows, err := e.b.Rows(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := verifyRow(&rows[i]); err != nil {
			return nil, e.diagnose(ctx, &rows[i], err)
		}
	}
	return rows, nil
}

// replay computes the states of rows (ascending), starting from the base
// row's snapshot: the rows that replay from base, and the rows on their
// paths that replay from a later snapshot (a late snapshot, attached after
// the rows below it were committed). Rows of other groups and branches,
// whose parent state is unknown, are skipped. keep puts a snapshot decoded
// here in the cache (a history walk, which reads each snapshot once, does
// not: it would push out the ones loads need and hold its own).
func (e *Engine) replay(rows []driver.Row, base int64, keep bool) (map[int64]state.Doc, error) {
	states := make(map[int64]state.Doc, len(rows))
	for i := range rows {
		r := &rows[i]
		if r.Seq == base {
			k := snapKey{r.Thread, r.Namespace, r.Seq}
			d, ok := e.cache.get(k)
			if !ok {
				var err error
				if d, err = decodeSnapshot(r); err != nil {
					return nil, err
				}
				// Weighed by the decoded state's footprint, not the stored
				// (compressed) bytes: a budget of stored bytes held ten
				// times its size.
				if keep {
					e.cache.put(k, d, state.Footprint(d))
				}
			}
			states[r.Seq] = d
			continue
		}
		prev, ok := states[r.Parent]
		if !ok && r.Base != base {
			continue // another group's row
		}
		if !ok {
			return nil, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "row", Err: fmt.Errorf("parent %d is not in the chain of snapshot %d", r.Parent, base)}
		}
		p, err := decodePatch(r)
		if err != nil {
			return nil, err
		}
		d, err := prev.Apply(p)
		if err != nil {
			return nil, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
		}
		states[r.Seq] = d
	}
	return states, nil
}

// Load implements Store.
func (e *Engine) Load(ctx context.Context, r LoadRequest) (Checkpoint, error) {
	if err := e.check(r.Thread, r.Namespace); err != nil {
		return Checkpoint{}, err
	}
	if r.Seq < 0 {
		return Checkpoint{}, fmt.Errorf("%w: seq %d", ErrInvalidArgument, r.Seq)
	}
	q := driver.RowQuery{Thread: r.Thread, Namespace: r.Namespace, From: r.Seq, To: r.Seq}
	if r.Seq == 0 {
		q = driver.RowQuery{Thread: r.Thread, Namespace: r.Namespace, Desc: true, Limit: 1}
	}
	target, err := e.rows(ctx, q)
	if err != nil {
		return Checkpoint{}, err
	}
	if len(target) == 0 {
		if r.Seq == 0 {
			return Checkpoint{}, fmt.Errorf("%w: thread %q namespace %q has no checkpoints", ErrNotFound, r.Thread, r.Namespace)
		}
		return Checkpoint{}, fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d", ErrNotFound, r.Thread, r.Namespace, r.Seq)
	}
	t := target[0]
	if d, ok := e.cache.get(snapKey{r.Thread, r.Namespace, t.Seq}); ok {
		// A snapshot's state, or a head this engine committed: no replay.
		cp, err := checkpoint(&t)
		if err != nil {
			return Checkpoint{}, err
		}
		cp.State, cp.HasState = d, true
		return cp, nil
	}
	rows, base, err := e.chainRows(ctx, r.Thread, r.Namespace, t.Base, t.Seq)
	if err != nil {
		return Checkpoint{}, err
	}
	chain := ancestry(rows, t.Seq, base)
	if len(chain) == 0 {
		return Checkpoint{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: t.Seq, What: "row", Err: fmt.Errorf("no path to snapshot %d", base)}
	}
	states, err := e.replay(chain, base, true)
	if err != nil {
		return Checkpoint{}, err
	}
	if base != t.Base {
		e.heal(chain, states)
	}
	cp, err := checkpoint(&t)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.State, cp.HasState = states[t.Seq], true
	return cp, nil
}

// chainWindow is how many rows chainRows reads at once when the rows
// between a checkpoint and its snapshot are many.
const chainWindow = 4096

// chainRows reads the rows from base to seq (chainSpan), and returns them
// with the seq of the snapshot they replay from: base, or, when base is a
// row whose late snapshot is not written (yet), the snapshot that row
// replays from, with the rows down to it.
func (e *Engine) chainRows(ctx context.Context, thread, ns string, base, seq int64) ([]driver.Row, int64, error) {
	rows, err := e.chainSpan(ctx, thread, ns, base, seq)
	for err == nil && len(rows) > 0 && rows[0].Seq == base && !rows[0].HasSnapshot && rows[0].Base < base {
		if _, cached := e.cache.get(snapKey{thread, ns, base}); cached {
			break
		}
		var lower []driver.Row
		if lower, err = e.chainSpan(ctx, thread, ns, rows[0].Base, base); err != nil {
			break
		}
		base = rows[0].Base
		below := slices.DeleteFunc(lower, func(r driver.Row) bool { return r.Seq >= rows[0].Seq })
		rows = append(below, rows...)
	}
	return rows, base, err
}

// chainSpan reads the rows from base to seq with their patches, and the
// base's snapshot unless the cache has it: all the rows between them when
// they are few, else the chain itself, walking down the parent links a
// window at a time — a checkpoint forked from far back in a long history
// reads its own few ancestors, not the whole history since its snapshot.
func (e *Engine) chainSpan(ctx context.Context, thread, ns string, base, seq int64) ([]driver.Row, error) {
	_, cached := e.cache.get(snapKey{thread, ns, base})
	if seq-base < chainWindow {
		return e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: base, To: seq, Snapshots: !cached})
	}
	// The checkpoint itself first: a fork's parent may be far below it.
	top, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: seq, To: seq})
	if err != nil || len(top) == 0 || top[0].Parent == 0 {
		return top, err
	}
	chain := top // descending
	for next := top[0].Parent; ; {
		from := max(base, next-chainWindow+1)
		rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: from, To: next, Snapshots: !cached && from == base})
		if err != nil {
			return nil, err
		}
		at := make(map[int64]int, len(rows))
		for i := range rows {
			at[rows[i].Seq] = i
		}
		cur := next
		for {
			i, ok := at[cur]
			if !ok {
				return nil, nil // a broken chain: the caller reports it
			}
			chain = append(chain, rows[i])
			if cur == base || rows[i].Parent == 0 {
				slices.Reverse(chain)
				return chain, nil
			}
			if cur = rows[i].Parent; cur < from {
				break // a fork's jump: the next window ends at its parent
			}
		}
		next = cur
	}
}

// ancestry returns the rows on the path from base to seq, ascending, or nil
// when the path is broken.
func ancestry(rows []driver.Row, seq, base int64) []driver.Row {
	bySeq := make(map[int64]int, len(rows))
	for i := range rows {
		bySeq[rows[i].Seq] = i
	}
	var path []int
	for cur := seq; ; {
		i, ok := bySeq[cur]
		if !ok {
			return nil
		}
		path = append(path, i)
		if cur == base {
			break
		}
		cur = rows[i].Parent
	}
	out := make([]driver.Row, len(path))
	for j, i := range path {
		out[len(path)-1-j] = rows[i]
	}
	return out
}

// historyGroup holds a history walk's states of one snapshot group: the
// states replayed from one snapshot, for the rows of a page that share it.
type historyGroup struct {
	base   int64
	states map[int64]state.Doc
	weight int64 // the footprint of the group's snapshot state
}

// largeState is the footprint from which a walk collects the group it
// drops before it decodes the next: two states that large are not held at
// once. A collection costs a few milliseconds; decoding such a snapshot
// costs tens.
const largeState = 16 << 20

// stateOf returns row's state, replaying the row's group when it is not
// the one held.
func (g *historyGroup) stateOf(ctx context.Context, e *Engine, row *driver.Row) (state.Doc, error) {
	if d, ok := g.states[row.Seq]; ok && g.base == row.Base {
		return d, nil
	}
	// The group's states go before the next group is replayed: a walk
	// holds one group's states at a time.
	g.states = nil
	if g.weight >= largeState {
		runtime.GC()
	}
	g.weight = 0
	grp, base, err := e.chainRows(ctx, row.Thread, row.Namespace, row.Base, row.Seq)
	if err != nil {
		return state.Doc{}, err
	}
	if g.states, err = e.replay(grp, base, false); err != nil {
		return state.Doc{}, err
	}
	if base != row.Base {
		e.heal(grp, g.states)
	}
	g.base = row.Base
	if d, ok := g.states[base]; ok {
		g.weight = state.Footprint(d)
	}
	d, ok := g.states[row.Seq]
	if !ok {
		return state.Doc{}, &CorruptError{Thread: row.Thread, Namespace: row.Namespace, Seq: row.Seq, What: "row", Err: fmt.Errorf("no path to snapshot %d", row.Base)}
	}
	return d, nil
}
