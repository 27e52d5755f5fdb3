package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// Late snapshots. A snapshot is a whole state, encoded and compressed: on
// a large state it costs far more than the step's own commit. When the
// backend can attach a snapshot to a stored row (SnapshotAttacher), the
// engine commits the row without it and a worker encodes the state and
// attaches it afterwards, in a transaction of its own. The rows committed
// after it name it as their base at once; until it is written, a load
// whose base row has no snapshot replays from that row's own base
// (chainRows). A process that stops first loses only the work: the rows
// that name the snapshot load the longer way, and the first load or
// history walk that replays through it queues it again (heal).

// lateQueue is how many snapshots may wait for the worker; past it a
// snapshot is written inside its commit, as a backend without
// SnapshotAttacher does.
const lateQueue = 64

// lateJob is a snapshot to attach to a committed row.
type lateJob struct {
	key    headKey
	row    driver.Row // as committed: its checksum is the attach's condition
	state  state.Doc
	sealer rowSealer
	// heal: the row was read by a load, its blobs opened; the worker
	// reads it again as stored.
	heal bool
}

// lateSnaps runs the snapshot worker of an engine.
type lateSnaps struct {
	to   driver.SnapshotAttacher
	jobs chan lateJob
	done chan struct{}

	mu      sync.Mutex
	idle    *sync.Cond
	queued  int // jobs sent and not yet finished
	closing bool
	heals   map[snapKey]bool // rows a load queued a snapshot for

	// readOnly: an attach found the store opened read-only; loads no
	// longer queue heals.
	readOnly atomic.Bool
}

// healing claims a row for a heal; false when one is queued already.
func (l *lateSnaps) healing(r driver.Row) bool {
	k := snapKey{r.Thread, r.Namespace, r.Seq}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heals[k] {
		return false
	}
	l.heals[k] = true
	return true
}

// healed releases a row healing claimed.
func (l *lateSnaps) healed(r driver.Row) {
	l.mu.Lock()
	delete(l.heals, snapKey{r.Thread, r.Namespace, r.Seq})
	l.mu.Unlock()
}

func newLateSnaps(to driver.SnapshotAttacher) *lateSnaps {
	l := &lateSnaps{to: to, jobs: make(chan lateJob, lateQueue), done: make(chan struct{}), heals: map[snapKey]bool{}}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// offer queues a job; false when the queue is full or the engine closes.
func (l *lateSnaps) offer(j lateJob) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	select {
	case l.jobs <- j:
		l.queued++
		return true
	default:
		return false
	}
}

// finished marks one job done.
func (l *lateSnaps) finished() {
	l.mu.Lock()
	if l.queued--; l.queued == 0 {
		l.idle.Broadcast()
	}
	l.mu.Unlock()
}

// wait returns once every job queued so far is done.
func (l *lateSnaps) wait() {
	l.mu.Lock()
	for l.queued > 0 {
		l.idle.Wait()
	}
	l.mu.Unlock()
}

// close finishes the queued jobs and stops the worker.
func (l *lateSnaps) close() {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return
	}
	l.closing = true
	close(l.jobs)
	l.mu.Unlock()
	<-l.done
}

// readOnly reports whether b says it was opened read-only.
func readOnly(b driver.Backend) bool {
	ro, ok := b.(interface{ ReadOnly() bool })
	return ok && ro.ReadOnly()
}

// queueLate hands the snapshot of a row just committed to the worker,
// with e.mu held (the worker updates the head it leaves only after).
// False when the queue is full: the row keeps replaying from its base,
// and the next row's policy asks again.
func (e *Engine) queueLate(key headKey, row driver.Row, d state.Doc, sealer rowSealer) bool {
	row.Create, row.NewThread, row.Fence = nil, false, 0
	return e.late.offer(lateJob{key: key, row: row, state: d, sealer: sealer})
}

// lateDone returns the info of a row written on a parent whose late
// snapshot was attached (or given up) meanwhile: cur is the parent's info
// as the worker left it.
func lateDone(info, cur rowInfo) rowInfo {
	if info.base == cur.base {
		info.baseSize = cur.baseSize
	}
	info.pend = 0
	return info
}

// lateWorker attaches the queued snapshots, one at a time, until close.
func (e *Engine) lateWorker() {
	defer close(e.late.done)
	for j := range e.late.jobs {
		e.attach(j)
		e.late.healed(j.row)
		e.late.finished()
	}
}

// attach encodes a job's state and attaches it to its row. On success the
// head this engine wrote on that row's chain replays from it from now on.
func (e *Engine) attach(j lateJob) {
	if j.heal {
		var ok bool
		if j, ok = e.asStored(j); !ok {
			return
		}
	}
	r := j.row
	old := r.Sum
	r.Snapshot = j.sealer.sealSnapshot(e.encodeSnapshot(j.state))
	r.HasSnapshot = true
	r.Base, r.Since, r.BaseSize = r.Seq, 0, int64(len(r.Snapshot))
	r.Sum = driver.RowChecksum(&r)
	ok, err := e.late.to.AttachSnapshot(context.Background(), r, old)
	switch {
	case errors.Is(err, ErrReadOnly):
		e.late.readOnly.Store(true)
		e.log.Debug("late snapshot not written: the store is read-only", "thread", r.Thread, "ns", r.Namespace, "seq", r.Seq)
	case err != nil:
		e.log.Warn("late snapshot not written; loads replay from the one before until one of them writes it", "thread", r.Thread, "ns", r.Namespace, "seq", r.Seq, "err", err)
	}
	e.mu.Lock()
	if h, found := e.heads[j.key]; found && h.pend == r.Seq {
		if ok {
			h.baseSize = r.BaseSize
		}
		h.pend = 0
		e.heads[j.key] = h
	}
	e.mu.Unlock()
	if ok {
		e.cache.put(snapKey{r.Thread, r.Namespace, r.Seq}, j.state, state.Footprint(j.state))
		if e.log.Enabled(context.Background(), slog.LevelDebug) {
			e.log.Debug("late snapshot written", "thread", r.Thread, "ns", r.Namespace, "seq", r.Seq, "bytes", len(r.Snapshot))
		}
	}
}

// heal queues the late snapshots a load or a history walk found unwritten
// (their process stopped first, or their attach failed) among the rows it
// replayed, with the states the replay computed: the rows that name them
// load from them once they are written. The worker reads each row again
// as stored (asStored): the rows here hold their blobs opened.
func (e *Engine) heal(chain []driver.Row, states map[int64]state.Doc) {
	if e.late == nil || e.late.readOnly.Load() {
		return
	}
	named := make(map[int64]bool, 2)
	for i := range chain {
		named[chain[i].Base] = true
	}
	for i := range chain {
		r := chain[i]
		d, ok := states[r.Seq]
		if !ok || !named[r.Seq] || r.HasSnapshot || r.Base == r.Seq || !e.late.healing(r) {
			continue
		}
		r.Snapshot = nil
		if !e.late.offer(lateJob{key: headKey{r.Thread, r.Namespace}, row: r, state: d, heal: true}) {
			e.late.healed(r)
		}
	}
}

// asStored returns a heal's job with its row as stored (an encrypted
// store's blobs sealed, as its checksum covers them) and the sealer of its
// snapshot; false when the row is gone or was written again.
func (e *Engine) asStored(j lateJob) (lateJob, bool) {
	ctx := context.Background()
	rows, err := e.b.Rows(ctx, driver.RowQuery{Thread: j.row.Thread, Namespace: j.row.Namespace, From: j.row.Seq, To: j.row.Seq})
	if err != nil || len(rows) != 1 || rows[0].Sum != j.row.Sum || rows[0].HasSnapshot {
		return j, false
	}
	j.row = rows[0]
	sealer, err := e.snapshotSealer(ctx, j.row.Thread, j.row.Namespace, j.row.Seq)
	if err != nil {
		return j, false
	}
	j.sealer = sealer
	return j, true
}

// WaitSnapshots returns once the snapshots this engine queued to write
// after their commits are written (or given up). Close waits for them too.
func (e *Engine) WaitSnapshots() {
	if e.late != nil {
		e.late.wait()
	}
}
