package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// Append implements Store.
func (e *Engine) Append(ctx context.Context, cp Checkpoint) (Checkpoint, error) {
	if err := e.check(cp.Thread, cp.Namespace); err != nil {
		return Checkpoint{}, err
	}
	if cp.Parent < 0 {
		return Checkpoint{}, fmt.Errorf("%w: parent seq %d", ErrInvalidArgument, cp.Parent)
	}
	var parent rowInfo
	if cp.Parent > 0 {
		var err error
		if parent, err = e.info(ctx, cp.Thread, cp.Namespace, cp.Parent); err != nil {
			return Checkpoint{}, err
		}
	} else if cp.Namespace == "" {
		// An empty thread this engine created (rememberEmpty), if any.
		e.mu.Lock()
		if ri, ok := e.heads[headKey{cp.Thread, ""}]; ok && ri.seq == 0 {
			parent = ri
		}
		e.mu.Unlock()
	}
	return e.insertOn(ctx, cp, cp.Parent+1, parent)
}

// insert writes cp as row seq extending parent (zero rowInfo: no parent).
// create, when not nil, is the thread record to create with a first row;
// with newThread the thread must not exist.
func (e *Engine) insert(ctx context.Context, cp Checkpoint, seq int64, parent rowInfo, create *driver.ThreadRecord, newThread bool) (Checkpoint, error) {
	if cp.Status == 0 {
		cp.Status = StatusSuccess
	}
	if !cp.Status.Valid() {
		return Checkpoint{}, fmt.Errorf("%w: status %d", ErrInvalidArgument, cp.Status)
	}
	if len(cp.ExternalID) > MaxExternalID {
		return Checkpoint{}, fmt.Errorf("%w: external id of %d bytes, at most %d", ErrInvalidArgument, len(cp.ExternalID), MaxExternalID)
	}
	meta, err := encodeMeta(cp.Nodes, cp.Meta)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.Seq = seq
	cp.CreatedAt = e.now()
	row := driver.Row{
		Thread: cp.Thread, Namespace: cp.Namespace, Seq: seq, Parent: cp.Parent,
		Status: cp.Status, CreatedAt: cp.CreatedAt.UnixNano(), Meta: meta,
		Patch: e.encodePatch(cp.Patch), ExternalID: cp.ExternalID,
		Create: create, NewThread: newThread, Fence: FenceOf(ctx, cp.Thread),
	}
	if err := e.stepWrites(ctx, cp, &row); err != nil {
		return Checkpoint{}, err
	}
	if row.Fence != 0 {
		if _, ok := e.b.(LeaseStore); !ok {
			return Checkpoint{}, fmt.Errorf("%w: a fenced append on a store without leases", ErrInvalidArgument)
		}
	}
	if seq == 1 && create == nil {
		tenant, _ := SplitThreadKey(cp.Thread) // a thread made by its first commit is its key's tenant's
		row.Create = &driver.ThreadRecord{ID: cp.Thread, Tenant: tenant, CreatedAt: row.CreatedAt, Status: ThreadIdle}
		row.Create.Sum = driver.ThreadChecksum(row.Create)
	}
	if cp.Namespace == "" {
		row.Head = headUpdate(parent, ThreadStatusOf(cp), row.CreatedAt)
	}
	sealer, err := e.sealer(ctx, &row)
	if err != nil {
		return Checkpoint{}, err
	}
	late := e.placeSnapshot(&row, cp, parent, sealer)
	row.Sum = driver.RowChecksum(&row)
	key := headKey{cp.Thread, cp.Namespace}
	if err := e.b.Insert(ctx, row); err != nil {
		return Checkpoint{}, e.refused(err, key, cp, row.Fence, newThread)
	}
	e.remember(key, &row, parent, late, cp.State, sealer)
	if row.HasSnapshot {
		e.cache.put(snapKey{cp.Thread, cp.Namespace, seq}, cp.State, state.Footprint(cp.State))
	} else {
		e.cache.putHead(snapKey{cp.Thread, cp.Namespace, seq}, cp.State, state.Footprint(cp.State))
	}
	cp.Snapshot = row.HasSnapshot
	cp.HasState = true
	return cp, nil
}

// headUpdate is what a root row at time at, of status st, on parent
// writes of its thread's listing columns: nothing when the status stays
// idle and the last touch is less than TouchSlack old (the common commit
// writes its row alone), else the status and the touch.
func headUpdate(parent rowInfo, st ThreadStatus, at int64) *driver.HeadUpdate {
	if parent.status == ThreadIdle && st == ThreadIdle && parent.touched != 0 && at >= parent.touched && at-parent.touched < int64(TouchSlack) {
		return nil
	}
	return &driver.HeadUpdate{Status: st}
}

// placeSnapshot applies the snapshot policy to a row about to be inserted
// on parent: it sets the row's snapshot bookkeeping, and its snapshot when
// one is due and written inside the commit. It reports a snapshot due and
// to be written after the commit (late).
func (e *Engine) placeSnapshot(row *driver.Row, cp Checkpoint, parent rowInfo, sealer rowSealer) bool {
	since := parent.since + int64(len(row.Patch)) - sealer.overhead()
	want := cp.Parent == 0 || (since > e.minSnap && float64(since) > e.ratio*float64(parent.baseSize))
	late := want && cp.Parent != 0 && e.late != nil
	if !want || late {
		row.Base, row.Since, row.BaseSize = parent.base, since, parent.baseSize
		return late
	}
	row.Snapshot = sealer.sealSnapshot(e.encodeSnapshot(cp.State))
	row.HasSnapshot = true
	if e.log.Enabled(context.Background(), slog.LevelDebug) {
		e.log.Debug("snapshot written", "thread", cp.Thread, "ns", cp.Namespace, "seq", row.Seq, "bytes", len(row.Snapshot), "patch_bytes_since", since)
	}
	row.Base, row.Since, row.BaseSize = row.Seq, 0, int64(len(row.Snapshot))
	return false
}

// refused is the error of an insert the backend refused; a fenced or stale
// writer's cached head is dropped.
func (e *Engine) refused(err error, key headKey, cp Checkpoint, fence int64, newThread bool) error {
	switch {
	case errors.Is(err, ErrFenced):
		e.mu.Lock()
		delete(e.heads, key)
		e.mu.Unlock()
		e.log.Debug("fenced writer refused", "thread", cp.Thread, "ns", cp.Namespace, "token", fence)
		return err
	case errors.Is(err, ErrConflict) && newThread:
		return fmt.Errorf("%w: thread %q exists", ErrConflict, cp.Thread)
	case errors.Is(err, ErrConflict):
		e.mu.Lock()
		delete(e.heads, key)
		e.mu.Unlock()
		e.log.Debug("stale writer refused", "thread", cp.Thread, "ns", cp.Namespace, "parent", cp.Parent)
		return fmt.Errorf("%w: thread %q namespace %q: checkpoint %d is no longer the head", ErrConflict, cp.Thread, cp.Namespace, cp.Parent)
	}
	return err
}

// remember caches a committed row as its namespace's head, and queues its
// late snapshot (the rows after it replay from it at once: see
// latesnap.go).
func (e *Engine) remember(key headKey, row *driver.Row, parent rowInfo, late bool, d state.Doc, sealer rowSealer) {
	info := rowInfo{seq: row.Seq, base: row.Base, since: row.Since, baseSize: row.BaseSize, pend: parent.pend}
	status, touched := parent.status, parent.touched
	if row.Head != nil {
		status, touched = row.Head.Status, row.CreatedAt
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heads) >= maxCachedHeads {
		clear(e.heads)
	}
	if cur, ok := e.heads[key]; ok && parent.pend != 0 && cur.seq == parent.seq && cur.pend != parent.pend {
		info = lateDone(info, cur)
	}
	if late && info.pend == 0 && e.queueLate(key, *row, d, sealer) {
		info = rowInfo{seq: row.Seq, base: row.Seq, baseSize: row.BaseSize, pend: row.Seq}
	}
	info.status, info.touched = status, touched
	e.heads[key] = info
}

// info returns the snapshot bookkeeping of row seq, from the cache of rows
// this engine wrote or from the backend. A missing row is a conflict (the
// caller's head is not a head) or ErrNotFound (no such thread).
func (e *Engine) info(ctx context.Context, thread, ns string, seq int64) (rowInfo, error) {
	e.mu.Lock()
	ri, ok := e.heads[headKey{thread, ns}]
	e.mu.Unlock()
	if ok && ri.seq == seq {
		return ri, nil
	}
	rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: seq, To: seq})
	if err != nil {
		return rowInfo{}, err
	}
	if len(rows) == 0 {
		head, err := e.head(ctx, thread, ns)
		if err != nil {
			return rowInfo{}, err
		}
		if head == 0 {
			return rowInfo{}, fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d", ErrNotFound, thread, ns, seq)
		}
		return rowInfo{}, fmt.Errorf("%w: thread %q namespace %q: %d is not the head (head is %d)", ErrConflict, thread, ns, seq, head)
	}
	r := rows[0]
	return rowInfo{seq: r.Seq, base: r.Base, since: r.Since, baseSize: r.BaseSize}, nil
}

// head returns the newest seq of a thread namespace (0 when empty).
func (e *Engine) head(ctx context.Context, thread, ns string) (int64, error) {
	rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, Desc: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].Seq, nil
}
