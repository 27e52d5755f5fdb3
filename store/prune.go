package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadTTLKey is the thread metadata key that gives a thread its own time
// to live, counted from its last activity: a duration ("72h", "90m") or a
// number of minutes (as the LangGraph API's ttl). Prune with Expired
// deletes the threads past it.
const ThreadTTLKey = "cairn_ttl"

// ThreadTTL returns a thread's own time to live, if its metadata sets a
// valid one (ThreadTTLKey).
func ThreadTTL(md map[string]any) (time.Duration, bool) {
	switch v := md[ThreadTTLKey].(type) {
	case string:
		d, err := time.ParseDuration(v)
		return d, err == nil && d > 0
	case float64:
		return time.Duration(v * float64(time.Minute)), v > 0
	case int:
		return time.Duration(v) * time.Minute, v > 0
	case int64:
		return time.Duration(v) * time.Minute, v > 0
	}
	return 0, false
}

// pruneTries is how often Prune computes a namespace's keep set again when
// the namespace grew meanwhile.
const pruneTries = 3

// Prune implements Store.
func (e *Engine) Prune(ctx context.Context, r PruneRequest) (PruneResult, error) {
	if e.closed.Load() {
		return PruneResult{}, ErrClosed
	}
	if err := r.check(); err != nil {
		return PruneResult{}, err
	}
	logsOnly := r.RunLogsOlderThan > 0 && r.KeepLast == 0 && r.OlderThan == 0 && !r.Expired
	if r.KeepLast == 0 && r.OlderThan == 0 && !r.Expired && !logsOnly {
		r.KeepLast = 1 // the form this request had before it could do more
	}
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	var res PruneResult
	if r.RunLogsOlderThan > 0 {
		n, err := e.trimRunLogs(ctx, r.Now.Add(-r.RunLogsOlderThan))
		if res.RunLogs = n; err != nil || logsOnly {
			return res, err
		}
	}
	// What a checkpoint replays from is settled once its late snapshot is
	// written: a prune that ran before would keep the rows below it.
	e.WaitSnapshots()
	threads, err := e.pruneThreads(ctx, r.Thread)
	if err != nil {
		return res, err
	}
	for _, th := range threads {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		gone, err := e.expire(ctx, th, r, &res)
		if err != nil || gone || r.KeepLast == 0 {
			if err != nil {
				return res, err
			}
			continue
		}
		if err := e.pruneThread(ctx, th.ID, int64(r.KeepLast), &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// pruneThreads lists the threads a prune looks at.
func (e *Engine) pruneThreads(ctx context.Context, id string) ([]Thread, error) {
	if id != "" {
		if err := ValidateThreadID(id); err != nil {
			return nil, err
		}
		th, err := e.Thread(ctx, id)
		if err != nil {
			return nil, err
		}
		return []Thread{th}, nil
	}
	var out []Thread
	for t, err := range e.Threads(ctx, ThreadFilter{}) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// expire deletes a thread idle for longer than r.OlderThan or its own
// time to live (r.Expired), unless it is busy: a run pending or running
// on it, or its head paused for an answer.
func (e *Engine) expire(ctx context.Context, th Thread, r PruneRequest, res *PruneResult) (bool, error) {
	idle := r.Now.Sub(th.UpdatedAt)
	ttl, own := ThreadTTL(th.Metadata)
	if !(r.OlderThan > 0 && idle > r.OlderThan) && !(r.Expired && own && idle > ttl) {
		return false, nil
	}
	busy, err := e.busy(ctx, th)
	if err != nil || busy {
		if busy {
			res.Busy = append(res.Busy, th.ID)
		}
		return false, err
	}
	if err := e.DeleteThread(ctx, th.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	res.Deleted = append(res.Deleted, th.ID)
	return true, nil
}

// busy reports whether a thread has a run pending or running, or a head
// paused for an answer: expiry leaves it be.
func (e *Engine) busy(ctx context.Context, th Thread) (bool, error) {
	if rl, ok := e.b.(RunLog); ok {
		runs, err := rl.Runs(ctx, RunQuery{Thread: th.ID, Status: []string{"pending", "running"}, Limit: 1})
		if err != nil || len(runs) > 0 {
			return len(runs) > 0, err
		}
	}
	if th.Head == 0 {
		return false, nil
	}
	if th.Status == ThreadInterrupted { // a pause: an interrupt, or a step's commit that paused before the next
		return true, nil
	}
	rows, err := e.rows(ctx, driver.RowQuery{Thread: th.ID, From: th.Head, To: th.Head})
	if err != nil || len(rows) == 0 {
		return false, err
	}
	return rows[0].Status == StatusInterrupted, nil
}

// pruneThread prunes every namespace of a thread to the newest keep
// checkpoints of each branch.
func (e *Engine) pruneThread(ctx context.Context, thread string, keep int64, res *PruneResult) error {
	nss, err := e.b.Namespaces(ctx, thread)
	if err != nil {
		return err
	}
	pruned := false
	gone := map[string][]driver.SeqRange{}
	for _, nsr := range nss {
		out, err := e.pruneNamespace(ctx, thread, nsr.Name, keep)
		e.cache.dropThread(thread)
		if errors.Is(err, ErrConflict) {
			if !slices.Contains(res.Busy, thread) { // once, however many of its namespaces were busy
				res.Busy = append(res.Busy, thread)
			}
			continue
		}
		if err != nil {
			return err
		}
		res.Checkpoints += out.n
		res.Bytes += out.bytes
		res.Rebased += out.rebased
		res.RebasedBytes += out.rebasedBytes
		pruned = pruned || out.n > 0
		if out.n > 0 {
			gone[nsr.Name] = out.ranges
		}
	}
	if pruned {
		res.Threads++
		n, err := e.trimInbox(ctx, thread)
		if err != nil {
			return err
		}
		res.InboxEntries += n
	}
	logs, err := e.dropRunLogs(ctx, thread, gone)
	res.RunLogs += logs
	return err
}

// nsPruned is what a prune did to one namespace: n rows deleted (ranges),
// of bytes stored; rebased rows given a snapshot, of rebasedBytes.
type nsPruned struct {
	n, bytes              int64
	ranges                []driver.SeqRange
	rebased, rebasedBytes int64
}

// pruneNamespace deletes what one namespace does not keep, trying again
// when it changed meanwhile (ErrConflict after pruneTries).
func (e *Engine) pruneNamespace(ctx context.Context, thread, ns string, keep int64) (nsPruned, error) {
	var err error
	for range pruneTries {
		var out nsPruned
		if out, err = e.pruneOnce(ctx, thread, ns, keep); !errors.Is(err, ErrConflict) {
			return out, err
		}
	}
	return nsPruned{}, err
}

// pruneOnce plans a namespace's prune and carries it out in one
// transaction: the rows that go are deleted and the kept rows rebased
// (see rebasePlan), unless the namespace changed since it was read.
func (e *Engine) pruneOnce(ctx context.Context, thread, ns string, keep int64) (nsPruned, error) {
	stored, err := e.storedRows(ctx, driver.RowQuery{Thread: thread, Namespace: ns})
	if err != nil || len(stored) == 0 {
		return nsPruned{}, err
	}
	rows := slices.Clone(stored) // opening a blob replaces it: stored keeps them as stored
	if err := e.openRows(ctx, rows); err != nil {
		return nsPruned{}, err
	}
	plan := planPrune(rows, keep)
	if len(plan.ranges) == 0 {
		return nsPruned{}, nil
	}
	rebase, out, err := e.rebaseRows(ctx, stored, rows, plan.rebase)
	if err != nil {
		return nsPruned{}, err
	}
	if out.n, err = e.b.DeleteRanges(ctx, thread, ns, rows[len(rows)-1].Seq, plan.ranges, rebase); err != nil {
		return nsPruned{}, err
	}
	out.bytes, out.ranges = plan.bytes, plan.ranges
	return out, nil
}

// prunePlan is what a prune changes in one namespace.
type prunePlan struct {
	ranges []driver.SeqRange // the rows that go
	bytes  int64             // their stored size
	// rebase maps each kept row whose state would replay through a row
	// that goes to the row it replays from afterwards (rebasePlan); a row
	// mapped to itself gets the snapshot of its own state.
	rebase map[int64]int64
}

// planPrune plans the prune of rows (one namespace, ascending by seq) to
// the newest keep checkpoints of each branch.
func planPrune(rows []driver.Row, keep int64) prunePlan {
	at := func(seq int64) *driver.Row {
		i, ok := slices.BinarySearchFunc(rows, seq, func(r driver.Row, s int64) int { return cmp.Compare(r.Seq, s) })
		if !ok {
			return nil
		}
		return &rows[i]
	}
	kept := keptRows(rows, keep, at)
	var p prunePlan
	for i := range rows {
		r := &rows[i]
		if kept[r.Seq] {
			continue
		}
		p.bytes += int64(len(r.Patch) + len(r.Meta))
		if r.HasSnapshot {
			p.bytes += r.BaseSize
		}
		if n := len(p.ranges); n > 0 && i > 0 && p.ranges[n-1].To == rows[i-1].Seq {
			p.ranges[n-1].To = r.Seq
			continue
		}
		p.ranges = append(p.ranges, driver.SeqRange{From: r.Seq, To: r.Seq})
	}
	if len(p.ranges) > 0 {
		p.rebase = rebasePlan(rows, kept)
	}
	return p
}

// keptRows returns the seqs a prune keeps: the newest keep checkpoints
// of every branch (walking back from each tip: a checkpoint nothing was
// built on), and the checkpoint each kept failed or paused one resumes
// from (Meta.StepOf) — its state is the one the step runs again on, its
// pending writes the tasks that step finished.
func keptRows(rows []driver.Row, keep int64, at func(int64) *driver.Row) map[int64]bool {
	built := make(map[int64]bool, len(rows))
	for i := range rows {
		built[rows[i].Parent] = true
	}
	kept := make(map[int64]bool, len(rows))
	for i := range rows {
		if built[rows[i].Seq] {
			continue // not a branch's tip
		}
		r := &rows[i]
		for k := int64(0); k < keep && r != nil; k++ {
			kept[r.Seq] = true
			r = at(r.Parent)
		}
	}
	for i := range rows {
		r := &rows[i]
		if !kept[r.Seq] || r.Status != StatusFailed && r.Status != StatusInterrupted {
			continue
		}
		if s := stepOf(r); s > 0 && at(s) != nil {
			kept[s] = true
		}
	}
	return kept
}

// stepOf is the Meta.StepOf of an opened row (0 when its metadata has
// none).
func stepOf(r *driver.Row) int64 {
	var m struct {
		StepOf int64 `json:"step_of"`
	}
	if len(r.Meta) == 0 || json.Unmarshal(r.Meta, &m) != nil {
		return 0
	}
	return m.StepOf
}

// rebasePlan maps each kept row whose base the prune deletes — or whose
// base is kept on another branch, past rows it deletes — to the row it is
// to replay from: the nearest row below it on its branch that has a
// snapshot, or else the root of its branch (the oldest row of the
// unbroken run of kept rows it is the top of). A root without a snapshot
// maps to itself: it gets one. A row whose base is kept on its branch but
// has no snapshot (a late snapshot not written) replays from that base's
// own base, which this plan keeps on the branch or rebases in turn.
func rebasePlan(rows []driver.Row, kept map[int64]bool) map[int64]int64 {
	root := make(map[int64]int64, len(kept))
	anchor := make(map[int64]int64, len(kept))
	out := map[int64]int64{}
	for i := range rows { // ascending: a parent is seen before its children
		r := &rows[i]
		if !kept[r.Seq] {
			continue
		}
		root[r.Seq], anchor[r.Seq] = r.Seq, r.Seq
		if kept[r.Parent] {
			root[r.Seq] = root[r.Parent]
			if !r.HasSnapshot {
				anchor[r.Seq] = anchor[r.Parent]
			}
		}
		if r.HasSnapshot || r.Base != r.Seq && kept[r.Base] && root[r.Base] == root[r.Seq] {
			continue
		}
		out[r.Seq] = anchor[r.Seq]
	}
	return out
}
