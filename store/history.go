package store

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// History implements Store.
func (e *Engine) History(ctx context.Context, r HistoryRequest) iter.Seq2[Checkpoint, error] {
	return func(yield func(Checkpoint, error) bool) {
		if err := e.check(r.Thread, r.Namespace); err != nil {
			yield(Checkpoint{}, err)
			return
		}
		w := historyWalk{e: e, r: r, yield: yield}
		w.run(ctx)
	}
}

// historyWalk lists a namespace's rows newest first, a page at a time,
// checking that what it lists holds together (chainCheck).
type historyWalk struct {
	e     *Engine
	r     HistoryRequest
	yield func(Checkpoint, error) bool
	group historyGroup
	chain chainCheck
	page  int
	start int64 // the first page's upper bound (0: none)
	n     int   // rows listed
}

func (w *historyWalk) run(ctx context.Context) {
	if w.page = w.r.PageSize; w.page <= 0 {
		w.page = 100
	}
	if w.r.Before > 0 {
		if w.start = w.r.Before - 1; w.start == 0 {
			return
		}
	}
	for to := w.start; ; {
		rows, err := w.e.rows(ctx, driver.RowQuery{Thread: w.r.Thread, Namespace: w.r.Namespace, To: to, Desc: true, Limit: w.page})
		if err != nil {
			w.yield(Checkpoint{}, err)
			return
		}
		for i := range rows {
			if !w.list(ctx, &rows[i]) {
				return
			}
		}
		if len(rows) < w.page || rows[len(rows)-1].Seq <= 1 {
			// Past the oldest row: every chain listed must have ended.
			if err := w.missing(ctx, 0); err != nil {
				w.yield(Checkpoint{}, err)
			}
			return
		}
		to = rows[len(rows)-1].Seq - 1
	}
}

// list checks and yields one row; false ends the walk.
func (w *historyWalk) list(ctx context.Context, row *driver.Row) bool {
	err := w.chain.order(row)
	if err == nil {
		err = w.missing(ctx, row.Seq)
	}
	if err != nil {
		w.yield(Checkpoint{}, err)
		return false
	}
	w.chain.see(row)
	cp, err := checkpoint(row)
	if err == nil && w.r.WithState {
		var d state.Doc
		d, err = w.group.stateOf(ctx, w.e, row)
		cp.State, cp.HasState = d, err == nil
	}
	if !w.yield(cp, err) || err != nil {
		return false
	}
	w.n++
	return w.r.Limit <= 0 || w.n < w.r.Limit
}

// missing checks the parents the walk went past without listing them, now
// that it lists seq (0: it is past the oldest row).
func (w *historyWalk) missing(ctx context.Context, seq int64) error {
	for {
		child, parent := w.chain.passed(seq)
		if child == 0 {
			return nil
		}
		damaged, err := w.damaged(ctx, child, parent)
		if err != nil {
			return err
		}
		if damaged {
			return &CorruptError{Thread: w.r.Thread, Namespace: w.r.Namespace, Seq: child, What: "history",
				Err: fmt.Errorf("its parent %d is missing, and it holds no snapshot of its own as the oldest checkpoint a prune keeps does: %s", parent, damageAdvice)}
		}
	}
}

// damaged reports whether child's parent is really missing: the walk's
// pages, read again without yielding, list the row child as before and
// still not its parent. A prune that ran during the walk may have deleted
// both, or cut the chain at child and written its snapshot: no damage.
// The pages are read again, not the row alone, because a damaged b-tree
// can list a row that a look-up by its seq does not find.
func (w *historyWalk) damaged(ctx context.Context, child, parent int64) (bool, error) {
	found := false
	for to := w.start; ; {
		rows, err := w.e.rows(ctx, driver.RowQuery{Thread: w.r.Thread, Namespace: w.r.Namespace, To: to, Desc: true, Limit: w.page})
		if err != nil {
			return false, err
		}
		for i := range rows {
			switch r := &rows[i]; {
			case r.Seq == child:
				found = !r.HasSnapshot && r.Parent == parent
			case r.Seq == parent:
				return false, nil
			case r.Seq < parent:
				return found, nil
			}
		}
		if len(rows) < w.page || rows[len(rows)-1].Seq <= 1 {
			return found, nil
		}
		to = rows[len(rows)-1].Seq - 1
	}
}

// chainCheck follows a history walk down a namespace and finds rows the
// database lost: the rows must come newest first, and every chain must end
// at a root (parent 0) or where a prune cut it. A prune keeps each kept
// checkpoint's ancestors down to the snapshot it replays from (prunable,
// needChain), so the oldest row it leaves on a chain holds a snapshot of
// its own (Row.HasSnapshot): that is the mark of a pruned boundary (a copy
// of a pruned thread gives such a row parent 0 instead). A row without a
// snapshot whose parent the walk went past without listing means rows are
// gone that no prune deleted.
type chainCheck struct {
	last    int64           // the seq listed last (0: none yet)
	waiting []int64         // parents of listed rows without a snapshot, not listed yet, ascending
	child   map[int64]int64 // each waiting parent → the listed row that names it
}

// order checks that row comes after the rows listed before it.
func (c *chainCheck) order(row *driver.Row) error {
	if c.last != 0 && row.Seq >= c.last {
		return &CorruptError{Thread: row.Thread, Namespace: row.Namespace, Seq: row.Seq, What: "history",
			Err: fmt.Errorf("listed after checkpoint %d, not before it: %s", c.last, damageAdvice)}
	}
	return nil
}

// see records a row the walk lists.
func (c *chainCheck) see(row *driver.Row) {
	c.last = row.Seq
	if n := len(c.waiting); n > 0 && c.waiting[n-1] == row.Seq {
		c.waiting = c.waiting[:n-1]
		delete(c.child, row.Seq)
	}
	if row.Parent == 0 || row.HasSnapshot {
		return
	}
	if _, ok := c.child[row.Parent]; !ok {
		if c.child == nil {
			c.child = map[int64]int64{}
		}
		c.child[row.Parent] = row.Seq
		i, _ := slices.BinarySearch(c.waiting, row.Parent)
		c.waiting = slices.Insert(c.waiting, i, row.Parent)
	}
}

// passed returns, and forgets, a waiting parent above seq (one the walk
// went past) and the row that names it; 0, 0 when there is none.
func (c *chainCheck) passed(seq int64) (child, parent int64) {
	n := len(c.waiting)
	if n == 0 || c.waiting[n-1] <= seq {
		return 0, 0
	}
	parent = c.waiting[n-1]
	child = c.child[parent]
	c.waiting = c.waiting[:n-1]
	delete(c.child, parent)
	return child, parent
}

// damageAdvice is what to do about rows a database lost.
const damageAdvice = "the store is damaged (rows lost, or deleted outside Cairn): check the database " +
	"(SQLite: sqlite3 FILE 'PRAGMA integrity_check') and restore it from a backup"
