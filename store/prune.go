package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
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
	rows, err := e.rows(ctx, RowQuery{Thread: th.ID, From: th.Head, To: th.Head})
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
	gone := map[string][]SeqRange{}
	for _, nsr := range nss {
		n, bytes, ranges, err := e.pruneNamespace(ctx, thread, nsr.Name, keep)
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
		res.Checkpoints += n
		res.Bytes += bytes
		pruned = pruned || n > 0
		if n > 0 {
			gone[nsr.Name] = ranges
		}
	}
	if pruned {
		res.Threads++
	}
	logs, err := e.dropRunLogs(ctx, thread, gone)
	res.RunLogs += logs
	return err
}

// pruneNamespace deletes what one namespace does not need, trying again
// when it grew meanwhile (ErrConflict after pruneTries).
func (e *Engine) pruneNamespace(ctx context.Context, thread, ns string, keep int64) (int64, int64, []SeqRange, error) {
	var err error
	for range pruneTries {
		var rows []Row
		if rows, err = e.rows(ctx, RowQuery{Thread: thread, Namespace: ns}); err != nil || len(rows) == 0 {
			return 0, 0, nil, err
		}
		ranges, bytes := prunable(rows, keep)
		if len(ranges) == 0 {
			return 0, 0, nil, nil
		}
		var n int64
		if n, err = e.b.DeleteRanges(ctx, thread, ns, rows[len(rows)-1].Seq, ranges); err == nil {
			return n, bytes, ranges, nil
		}
		if !errors.Is(err, ErrConflict) {
			return 0, 0, nil, err
		}
	}
	return 0, 0, nil, err
}

// prunable returns the seq ranges of rows (ascending by seq) that no
// branch's newest keep checkpoints need, and their stored bytes.
func prunable(rows []Row, keep int64) ([]SeqRange, int64) {
	at := func(seq int64) *Row {
		i, ok := slices.BinarySearchFunc(rows, seq, func(r Row, s int64) int { return cmp.Compare(r.Seq, s) })
		if !ok {
			return nil
		}
		return &rows[i]
	}
	built := make(map[int64]bool, len(rows))
	for i := range rows {
		built[rows[i].Parent] = true
	}
	need := make(map[int64]bool, len(rows))
	reach := make(map[int64]int64, len(rows))
	for i := range rows {
		if built[rows[i].Seq] {
			continue // not a branch's tip
		}
		r := &rows[i]
		for k := int64(0); k < keep && r != nil; k++ {
			needChain(r, at, need, reach)
			r = at(r.Parent)
		}
	}
	var out []SeqRange
	var bytes int64
	for i := range rows {
		r := &rows[i]
		if need[r.Seq] {
			continue
		}
		bytes += int64(len(r.Patch) + len(r.Meta))
		if r.HasSnapshot {
			bytes += r.BaseSize
		}
		if n := len(out); n > 0 && i > 0 && out[n-1].To == rows[i-1].Seq {
			out[n-1].To = r.Seq
			continue
		}
		out = append(out, SeqRange{From: r.Seq, To: r.Seq})
	}
	return out, bytes
}

// needChain marks a row and the rows its state replays through: its
// ancestors back to its base, the snapshot it starts from, and past that
// base when its late snapshot is not written (yet) to the snapshot it
// replays from (see latesnap.go).
// reach records, per row, the lowest base a walk through it went down to:
// a later walk stops at a row already walked to its own base or below.
func needChain(r *Row, at func(int64) *Row, need map[int64]bool, reach map[int64]int64) {
	base := r.Base
	for r != nil {
		if b, ok := reach[r.Seq]; ok && b <= base {
			return
		}
		need[r.Seq], reach[r.Seq] = true, base
		if r.Seq == base && !r.HasSnapshot && r.Base < base {
			base = r.Base // a late snapshot not written (yet): replayed from further down
		}
		if r.Seq == base || r.Parent == 0 {
			return
		}
		r = at(r.Parent)
	}
}
