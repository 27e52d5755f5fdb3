package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/state"
)

// Options tune an Engine.
type Options struct {
	// SnapshotRatio: a row stores a snapshot when the stored patch bytes
	// since the last snapshot would exceed SnapshotRatio × that snapshot's
	// stored size. Default 1. Smaller means faster loads and more bytes.
	SnapshotRatio float64
	// MinSnapshotBytes: no snapshot is written before this many stored patch
	// bytes have accumulated since the last one (default 4096), so small
	// states are not snapshotted at every step.
	MinSnapshotBytes int64
	// NoCompression stores blobs uncompressed.
	NoCompression bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// InlineSnapshots writes every snapshot inside the commit of its row.
	// By default, on a backend that can (SnapshotAttacher), a snapshot
	// after the first is encoded and written after its row commits, by a
	// worker (docs/DESIGN.md, "Late snapshots").
	InlineSnapshots bool
	// SnapshotCache is the byte budget for decoded snapshot states kept in
	// memory, weighed by state.Footprint (default 16 MiB; negative
	// disables the cache).
	SnapshotCache int64
	// Keyring, when set, encrypts every blob the store writes (checkpoint
	// patches, snapshots and metadata, pending writes, run records and
	// events) with its newest key, and refuses blobs that are not
	// encrypted; see docs/encryption.md. Nil: no encryption, and encrypted
	// blobs are refused with ErrNoKey.
	Keyring *Keyring
	// Logger receives the store's doings at debug level (snapshots
	// written, stale writers refused) and the backends' (migrations at
	// info, group-commit batches at debug) when they are opened through
	// Open. Never a state value. Nil: no logging.
	Logger *slog.Logger
}

// Engine implements Store over a Backend: it owns the storage format (patch
// rows, snapshot policy, blob encoding) and the rebuilding of states.
type Engine struct {
	log     *slog.Logger
	b       Backend
	ratio   float64
	minSnap int64
	comp    bool
	now     func() time.Time
	closed  atomic.Bool

	mu    sync.Mutex
	heads map[headKey]rowInfo // the last row this engine wrote per namespace

	cache *snapCache
	crypt *rowCrypt
	late  *lateSnaps // nil: snapshots are written inside their commits

	// scratch holds reusable buffers for encoding snapshots, which are
	// large; only the compressed result is kept.
	scratch sync.Pool
}

// scratchBufs: doc and comp for patches and small snapshots; raw and chunk
// for a large snapshot's blobWriter.
type scratchBufs struct{ doc, comp, raw, chunk []byte }

// getScratch takes scratch buffers from the pool.
func (e *Engine) getScratch() *scratchBufs {
	if sb, ok := e.scratch.Get().(*scratchBufs); ok {
		return sb
	}
	return &scratchBufs{}
}

type headKey struct{ thread, ns string }

// rowInfo is what the snapshot policy needs of a parent row. pend is the
// row whose late snapshot is being written when that row is base (0:
// none); baseSize is then the previous snapshot's size until it is.
//
// For a root-namespace row, status and touched are what the thread's
// listing columns hold once the row is its head: its status, and the time
// of the last row that wrote them (0: not known, so the next row writes
// them; see HeadUpdate).
type rowInfo struct {
	seq, base, since, baseSize int64
	pend                       int64
	status                     ThreadStatus
	touched                    int64
}

const maxCachedHeads = 1 << 16

// New returns an Engine over b. The Engine owns b: Close closes it.
func New(b Backend, opts Options) *Engine {
	e := &Engine{b: b, ratio: opts.SnapshotRatio, comp: !opts.NoCompression, now: opts.Now, heads: map[headKey]rowInfo{}, log: opts.Logger, crypt: newRowCrypt(opts.Keyring)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.ratio <= 0 {
		e.ratio = 1
	}
	if e.minSnap = opts.MinSnapshotBytes; e.minSnap == 0 {
		e.minSnap = 4096
	}
	if e.now == nil {
		e.now = time.Now
	}
	switch {
	case opts.SnapshotCache == 0:
		e.cache = newSnapCache(16 << 20)
	case opts.SnapshotCache > 0:
		e.cache = newSnapCache(opts.SnapshotCache)
	}
	if a, ok := b.(SnapshotAttacher); ok && !opts.InlineSnapshots && !readOnly(b) {
		e.late = newLateSnaps(a)
		go e.lateWorker()
	}
	return e
}

// Backend returns the backend the engine writes to.
func (e *Engine) Backend() Backend { return e.b }

func (e *Engine) check(thread, ns string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := ValidateThreadID(thread); err != nil {
		return err
	}
	return ValidateNamespace(ns)
}

// CreateThread implements Store.
func (e *Engine) CreateThread(ctx context.Context, t Thread) (Thread, error) {
	if err := e.check(t.ID, ""); err != nil {
		return Thread{}, err
	}
	tenant, err := keyTenant(t.ID, t.Tenant)
	if err != nil {
		return Thread{}, err
	}
	rec := ThreadRecord{ID: t.ID, Tenant: tenant, CreatedAt: e.now().UnixNano(), Status: ThreadIdle}
	if len(t.Metadata) > 0 {
		b, err := json.Marshal(t.Metadata)
		if err != nil {
			return Thread{}, fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
		}
		rec.Metadata = b
	}
	rec.Sum = ThreadChecksum(&rec)
	if err := e.b.CreateThread(ctx, rec); err != nil {
		return Thread{}, err
	}
	e.rememberEmpty(rec.ID, rec.CreatedAt)
	return threadFromRecord(rec)
}

// rememberEmpty notes what a thread this engine created without a
// checkpoint holds in its listing columns (idle, touched at its creation),
// as the parent of its first root row: a first commit soon after needs
// not write them.
func (e *Engine) rememberEmpty(id string, created int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heads) >= maxCachedHeads {
		clear(e.heads)
	}
	e.heads[headKey{id, ""}] = rowInfo{status: ThreadIdle, touched: created}
}

func threadFromRecord(r ThreadRecord) (Thread, error) {
	if err := verifyThread(&r); err != nil {
		return Thread{}, err
	}
	t := Thread{ID: r.ID, Tenant: r.Tenant, CreatedAt: time.Unix(0, r.CreatedAt), Head: r.Head, Status: r.Status}
	t.UpdatedAt = t.CreatedAt
	if r.Head > 0 {
		t.UpdatedAt = time.Unix(0, r.HeadAt)
	}
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &t.Metadata); err != nil {
			return Thread{}, &CorruptError{Thread: r.ID, What: "thread metadata", Err: err}
		}
	}
	return t, nil
}

// Thread implements Store.
func (e *Engine) Thread(ctx context.Context, id string) (Thread, error) {
	if err := e.check(id, ""); err != nil {
		return Thread{}, err
	}
	rec, err := e.b.Thread(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	t, err := threadFromRecord(rec)
	if err == nil {
		err = e.knownStatus(ctx, &t)
	}
	return t, err
}

// Threads implements Store.
func (e *Engine) Threads(ctx context.Context, f ThreadFilter) iter.Seq2[Thread, error] {
	return func(yield func(Thread, error) bool) {
		if e.closed.Load() {
			yield(Thread{}, ErrClosed)
			return
		}
		q := ThreadQuery{Tenant: f.Tenant, Limit: f.PageSize}
		if q.Limit <= 0 {
			q.Limit = 100
		}
		if f.Limit > 0 && f.Limit < q.Limit {
			q.Limit = f.Limit // one page holds the whole listing
		}
		if len(f.Metadata) > 0 {
			q.Metadata = make(map[string]json.RawMessage, len(f.Metadata))
			for k, v := range f.Metadata {
				b, err := marshalPlain(v)
				if err != nil || (len(b) > 0 && (b[0] == '{' || b[0] == '[')) {
					yield(Thread{}, fmt.Errorf("%w: metadata filter %q must be a JSON scalar", ErrInvalidArgument, k))
					return
				}
				q.Metadata[k] = b
			}
			lq, err := listQuery(ThreadSearch{Metadata: f.Metadata})
			if err != nil {
				yield(Thread{}, err)
				return
			}
			q.Meta = lq.Meta
		}
		n := 0
		for {
			page, err := e.b.Threads(ctx, q)
			if err != nil {
				yield(Thread{}, err)
				return
			}
			for _, rec := range page {
				t, err := threadFromRecord(rec)
				if !yield(t, err) {
					return
				}
				if n++; f.Limit > 0 && n >= f.Limit {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			q.After = page[len(page)-1].ID
		}
	}
}

// SetMetadata implements Store.
func (e *Engine) SetMetadata(ctx context.Context, id string, md map[string]any) (Thread, error) {
	if err := e.check(id, ""); err != nil {
		return Thread{}, err
	}
	rec, err := e.b.Thread(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	if err := verifyThread(&rec); err != nil {
		return Thread{}, err
	}
	rec.Metadata = nil
	if len(md) > 0 {
		if rec.Metadata, err = json.Marshal(md); err != nil {
			return Thread{}, fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
		}
	}
	rec.Sum = ThreadChecksum(&rec)
	if err := e.b.UpdateThread(ctx, rec); err != nil {
		return Thread{}, err
	}
	return threadFromRecord(rec)
}

// DeleteThread implements Store.
func (e *Engine) DeleteThread(ctx context.Context, id string) error {
	if err := e.check(id, ""); err != nil {
		return err
	}
	e.forget(id)
	e.crypt.forget(id)
	e.cache.dropThread(id)
	return e.b.DeleteThread(ctx, id)
}

// EmptyThread deletes every checkpoint of a thread, with their snapshots
// and pending writes, and keeps the thread, its metadata and its runs:
// the thread is as it was before its first checkpoint, and at no moment
// does it not exist (DeleteThread and CreateThread would leave a moment
// when it does not). A namespace that grows meanwhile is ErrConflict.
func (e *Engine) EmptyThread(ctx context.Context, id string) error {
	if err := e.check(id, ""); err != nil {
		return err
	}
	e.WaitSnapshots()
	nss, err := e.b.Namespaces(ctx, id)
	if err != nil {
		return err
	}
	defer e.forget(id)
	defer e.cache.dropThread(id)
	for _, ns := range nss {
		if _, err := e.b.DeleteRanges(ctx, id, ns.Name, ns.Head, []SeqRange{{From: 1, To: ns.Head}}, nil); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) forget(thread string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.heads {
		if k.thread == thread {
			delete(e.heads, k)
		}
	}
}

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
func (e *Engine) insert(ctx context.Context, cp Checkpoint, seq int64, parent rowInfo, create *ThreadRecord, newThread bool) (Checkpoint, error) {
	if cp.Status == 0 {
		cp.Status = StatusSuccess
	}
	if !cp.Status.Valid() {
		return Checkpoint{}, fmt.Errorf("%w: status %d", ErrInvalidArgument, cp.Status)
	}
	meta, err := encodeMeta(cp.Nodes, cp.Meta)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.Seq = seq
	cp.CreatedAt = e.now()
	row := Row{
		Thread: cp.Thread, Namespace: cp.Namespace, Seq: seq, Parent: cp.Parent,
		Status: cp.Status, CreatedAt: cp.CreatedAt.UnixNano(), Meta: meta,
		Patch:  e.encodePatch(cp.Patch),
		Create: create, NewThread: newThread, Fence: FenceOf(ctx, cp.Thread),
	}
	if row.Fence != 0 {
		if _, ok := e.b.(LeaseStore); !ok {
			return Checkpoint{}, fmt.Errorf("%w: a fenced append on a store without leases", ErrInvalidArgument)
		}
	}
	if seq == 1 && create == nil {
		tenant, _ := SplitThreadKey(cp.Thread) // a thread made by its first commit is its key's tenant's
		row.Create = &ThreadRecord{ID: cp.Thread, Tenant: tenant, CreatedAt: row.CreatedAt, Status: ThreadIdle}
		row.Create.Sum = ThreadChecksum(row.Create)
	}
	if cp.Namespace == "" {
		row.Head = headUpdate(parent, ThreadStatusOf(cp), row.CreatedAt)
	}
	sealer, err := e.sealer(ctx, &row)
	if err != nil {
		return Checkpoint{}, err
	}
	late := e.placeSnapshot(&row, cp, parent, sealer)
	row.Sum = RowChecksum(&row)
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
func headUpdate(parent rowInfo, st ThreadStatus, at int64) *HeadUpdate {
	if parent.status == ThreadIdle && st == ThreadIdle && parent.touched != 0 && at >= parent.touched && at-parent.touched < int64(TouchSlack) {
		return nil
	}
	return &HeadUpdate{Status: st}
}

// placeSnapshot applies the snapshot policy to a row about to be inserted
// on parent: it sets the row's snapshot bookkeeping, and its snapshot when
// one is due and written inside the commit. It reports a snapshot due and
// to be written after the commit (late).
func (e *Engine) placeSnapshot(row *Row, cp Checkpoint, parent rowInfo, sealer rowSealer) bool {
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
func (e *Engine) remember(key headKey, row *Row, parent rowInfo, late bool, d state.Doc, sealer rowSealer) {
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

// encodePatch encodes a checkpoint's patch as a stored blob, through the
// engine's scratch buffers: only the blob itself is allocated.
func (e *Engine) encodePatch(p state.Patch) []byte {
	sb := e.getScratch()
	sb.doc = state.EncodePatch(sb.doc[:0], p)
	out := encodeBlob(sb.doc, e.comp, &sb.comp)
	e.scratch.Put(sb)
	return out
}

// encodeSnapshot encodes a full state as a stored blob. A large state is
// encoded and compressed a block at a time, never held whole in its
// encoded form beside the stored blob.
func (e *Engine) encodeSnapshot(d state.Doc) []byte {
	if state.EncodedDocSize(d) < blobChunk {
		sb := e.getScratch()
		sb.doc = state.EncodeDoc(sb.doc[:0], d)
		out := encodeBlob(sb.doc, e.comp, &sb.comp)
		e.scratch.Put(sb)
		return out
	}
	sb := e.getScratch()
	bw := newBlobWriter(e.comp, sb.raw, sb.chunk)
	_, _ = state.WriteDoc(bw, d) // a blobWriter never fails
	out := bw.finish()
	sb.raw, sb.chunk = bw.raw, bw.comp
	e.scratch.Put(sb)
	return out
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
	rows, err := e.rows(ctx, RowQuery{Thread: thread, Namespace: ns, From: seq, To: seq})
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
	rows, err := e.rows(ctx, RowQuery{Thread: thread, Namespace: ns, Desc: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].Seq, nil
}

// rows reads rows from the backend, checks each against its checksum and
// opens their blobs.
func (e *Engine) rows(ctx context.Context, q RowQuery) ([]Row, error) {
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
func (e *Engine) storedRows(ctx context.Context, q RowQuery) ([]Row, error) {
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

// metaRecord is the stored form of a checkpoint's metadata.
type metaRecord struct {
	Nodes []string `json:"nodes,omitempty"`
	Meta
}

func encodeMeta(nodes []string, m Meta) ([]byte, error) {
	if b, ok := appendMetaJSON(make([]byte, 0, 128), nodes, &m); ok {
		if len(b) == 2 { // {}
			return nil, nil
		}
		return b, nil
	}
	rec := metaRecord{Nodes: nodes, Meta: m}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint metadata: %v", ErrInvalidArgument, err)
	}
	if string(b) == "{}" {
		return nil, nil
	}
	return b, nil
}

// checkpoint decodes a row (its patch when present).
func checkpoint(r *Row) (Checkpoint, error) {
	cp := Checkpoint{
		Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, Parent: r.Parent,
		Status: r.Status, CreatedAt: time.Unix(0, r.CreatedAt), Snapshot: r.HasSnapshot,
	}
	if !r.Status.Valid() {
		return Checkpoint{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "row", Err: fmt.Errorf("status %d", r.Status)}
	}
	if len(r.Meta) > 0 {
		var rec metaRecord
		if err := json.Unmarshal(r.Meta, &rec); err != nil {
			return Checkpoint{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "metadata", Err: err}
		}
		cp.Nodes, cp.Meta = rec.Nodes, rec.Meta
	}
	p, err := decodePatch(r)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.Patch = p
	return cp, nil
}

func decodePatch(r *Row) (state.Patch, error) {
	payload, err := decodeBlob(r.Patch)
	if err == nil {
		var p state.Patch
		// The patch bytes are covered by the blob's CRC and by the row's
		// checksum, both checked before this: its JSON values are not
		// validated again (it is the hot path of every load).
		if p, err = state.DecodePatch(payload, false); err == nil {
			return p, nil
		}
	}
	return nil, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
}

// decodeSnapshot decodes a row's snapshot.
func decodeSnapshot(r *Row) (state.Doc, error) {
	if r.Snapshot == nil {
		return state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: errors.New("missing")}
	}
	// Its size was checked against the row's by Engine.openRows.
	payload, err := decodeBlob(r.Snapshot)
	if err == nil {
		var d state.Doc
		// A snapshot is bound to its row only by key and size, so its JSON
		// values are validated: a snapshot with a valid CRC but invalid
		// content is reported here, with its thread and seq.
		if d, err = state.DecodeDoc(payload, true); err == nil {
			return d, nil
		}
	}
	return state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: err}
}

// replay computes the states of rows (ascending), starting from the base
// row's snapshot: the rows that replay from base, and the rows on their
// paths that replay from a later snapshot (a late snapshot, attached after
// the rows below it were committed). Rows of other groups and branches,
// whose parent state is unknown, are skipped. keep puts a snapshot decoded
// here in the cache (a history walk, which reads each snapshot once, does
// not: it would push out the ones loads need and hold its own).
func (e *Engine) replay(rows []Row, base int64, keep bool) (map[int64]state.Doc, error) {
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
	q := RowQuery{Thread: r.Thread, Namespace: r.Namespace, From: r.Seq, To: r.Seq}
	if r.Seq == 0 {
		q = RowQuery{Thread: r.Thread, Namespace: r.Namespace, Desc: true, Limit: 1}
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
func (e *Engine) chainRows(ctx context.Context, thread, ns string, base, seq int64) ([]Row, int64, error) {
	rows, err := e.chainSpan(ctx, thread, ns, base, seq)
	for err == nil && len(rows) > 0 && rows[0].Seq == base && !rows[0].HasSnapshot && rows[0].Base < base {
		if _, cached := e.cache.get(snapKey{thread, ns, base}); cached {
			break
		}
		var lower []Row
		if lower, err = e.chainSpan(ctx, thread, ns, rows[0].Base, base); err != nil {
			break
		}
		base = rows[0].Base
		below := slices.DeleteFunc(lower, func(r Row) bool { return r.Seq >= rows[0].Seq })
		rows = append(below, rows...)
	}
	return rows, base, err
}

// chainSpan reads the rows from base to seq with their patches, and the
// base's snapshot unless the cache has it: all the rows between them when
// they are few, else the chain itself, walking down the parent links a
// window at a time — a checkpoint forked from far back in a long history
// reads its own few ancestors, not the whole history since its snapshot.
func (e *Engine) chainSpan(ctx context.Context, thread, ns string, base, seq int64) ([]Row, error) {
	_, cached := e.cache.get(snapKey{thread, ns, base})
	if seq-base < chainWindow {
		return e.rows(ctx, RowQuery{Thread: thread, Namespace: ns, From: base, To: seq, Snapshots: !cached})
	}
	// The checkpoint itself first: a fork's parent may be far below it.
	top, err := e.rows(ctx, RowQuery{Thread: thread, Namespace: ns, From: seq, To: seq})
	if err != nil || len(top) == 0 || top[0].Parent == 0 {
		return top, err
	}
	chain := top // descending
	for next := top[0].Parent; ; {
		from := max(base, next-chainWindow+1)
		rows, err := e.rows(ctx, RowQuery{Thread: thread, Namespace: ns, From: from, To: next, Snapshots: !cached && from == base})
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
func ancestry(rows []Row, seq, base int64) []Row {
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
	out := make([]Row, len(path))
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
func (g *historyGroup) stateOf(ctx context.Context, e *Engine, row *Row) (state.Doc, error) {
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

// Fork implements Store.
func (e *Engine) Fork(ctx context.Context, r ForkRequest) (Checkpoint, error) {
	if err := e.check(r.Thread, r.Namespace); err != nil {
		return Checkpoint{}, err
	}
	if r.At <= 0 {
		return Checkpoint{}, fmt.Errorf("%w: fork needs a checkpoint seq, got %d", ErrInvalidArgument, r.At)
	}
	if r.Into != "" {
		if err := ValidateThreadID(r.Into); err != nil {
			return Checkpoint{}, err
		}
	}
	src, err := e.Load(ctx, LoadRequest{Thread: r.Thread, Namespace: r.Namespace, Seq: r.At})
	if err != nil {
		return Checkpoint{}, err
	}
	if src.Status == StatusFailed || src.Status == StatusInterrupted {
		return Checkpoint{}, fmt.Errorf("%w: thread %q checkpoint %d is %s; fork from the checkpoint it resumes (%d)", ErrInvalidArgument, r.Thread, r.At, src.Status, src.Meta.StepOf)
	}
	st := src.State
	if len(r.Patch) > 0 {
		if st, err = st.Apply(r.Patch); err != nil {
			return Checkpoint{}, fmt.Errorf("%w: fork patch: %v", ErrInvalidArgument, err)
		}
	}
	cp := Checkpoint{Thread: r.Thread, Namespace: r.Namespace, Parent: r.At, Nodes: r.Nodes, Status: StatusSuccess, Patch: r.Patch, State: st, Meta: forkMeta(r.Meta, &src)}
	if r.Into == "" {
		head, err := e.head(ctx, r.Thread, r.Namespace)
		if err != nil {
			return Checkpoint{}, err
		}
		at, err := e.info(ctx, r.Thread, r.Namespace, r.At)
		if err != nil {
			return Checkpoint{}, err
		}
		// The branch's parent is not the head: what the thread's listing
		// columns hold is not known from it.
		at.status, at.touched = ThreadStatusUnknown, 0
		return e.insertOn(ctx, cp, head+1, at)
	}
	rec, err := e.forkThread(ctx, r)
	if err != nil {
		return Checkpoint{}, err
	}
	// The whole state is the new thread's first patch, so replaying the
	// thread from nothing gives the same state as its snapshot. The thread
	// record goes in the same transaction as the row: a crash never leaves
	// an empty thread behind.
	cp.Thread, cp.Parent = r.Into, 0
	cp.Patch = st.AsPatch()
	// The new thread's record is written idle, touched at its creation.
	return e.insert(ctx, cp, 1, rowInfo{status: ThreadIdle, touched: rec.CreatedAt}, &rec, true)
}

// forkMeta is the metadata of a fork checkpoint: the request's, marked as a
// fork of src, with src's schedule when the request gives none.
func forkMeta(m Meta, src *Checkpoint) Meta {
	if m.Source == "" {
		m.Source = "fork"
	}
	ref := src.Ref()
	m.ForkedFrom = &ref
	if m.Next == nil && m.Tasks == nil {
		m.Next, m.Tasks = src.Meta.Next, src.Meta.Tasks
	}
	return m
}

// forkThread builds the record of the thread a fork creates: the source
// thread's tenant, and its metadata unless the request gives new metadata.
func (e *Engine) forkThread(ctx context.Context, r ForkRequest) (ThreadRecord, error) {
	srcRec, err := e.b.Thread(ctx, r.Thread)
	if err != nil {
		return ThreadRecord{}, err
	}
	if err := verifyThread(&srcRec); err != nil {
		return ThreadRecord{}, err
	}
	if _, err := keyTenant(r.Into, srcRec.Tenant); err != nil {
		return ThreadRecord{}, err
	}
	rec := ThreadRecord{ID: r.Into, Tenant: srcRec.Tenant, Metadata: srcRec.Metadata, CreatedAt: e.now().UnixNano()}
	if r.Metadata != nil {
		rec.Metadata = nil
		if len(r.Metadata) > 0 {
			if rec.Metadata, err = json.Marshal(r.Metadata); err != nil {
				return ThreadRecord{}, fmt.Errorf("%w: fork thread metadata: %v", ErrInvalidArgument, err)
			}
		}
	}
	rec.Sum = ThreadChecksum(&rec)
	return rec, nil
}

// Namespaces implements Store.
func (e *Engine) Namespaces(ctx context.Context, thread string) ([]NamespaceInfo, error) {
	if err := e.check(thread, ""); err != nil {
		return nil, err
	}
	if _, err := e.Thread(ctx, thread); err != nil {
		return nil, err
	}
	recs, err := e.b.Namespaces(ctx, thread)
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceInfo, 0, len(recs))
	for _, rec := range recs {
		// The head row, checked against its checksum, gives the time.
		rows, err := e.rows(ctx, RowQuery{Thread: thread, Namespace: rec.Name, From: rec.Head, To: rec.Head})
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			continue // deleted meanwhile
		}
		out = append(out, NamespaceInfo{Name: rec.Name, Head: rec.Head, Checkpoints: rec.Count, UpdatedAt: time.Unix(0, rows[0].CreatedAt)})
	}
	return out, nil
}

// PutWrites implements Store.
func (e *Engine) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error {
	if err := e.check(thread, ns); err != nil {
		return err
	}
	for i, w := range ws {
		if w.Task == "" || !json.Valid(w.Update) {
			return fmt.Errorf("%w: write %d needs a task and a JSON update", ErrInvalidArgument, i)
		}
	}
	ws, err := e.sealWrites(ctx, thread, ns, seq, ws)
	if err != nil {
		return err
	}
	return e.b.PutWrites(ctx, thread, ns, seq, ws)
}

// Writes implements Store.
func (e *Engine) Writes(ctx context.Context, thread, ns string, seq int64) ([]Write, error) {
	if err := e.check(thread, ns); err != nil {
		return nil, err
	}
	ws, err := e.b.Writes(ctx, thread, ns, seq)
	if err != nil {
		return nil, err
	}
	return e.openWrites(ctx, thread, ns, seq, ws)
}

// Close implements Store. It waits for the snapshots queued to be written
// after their commits.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if e.late != nil {
		e.late.close()
	}
	return e.b.Close()
}

var _ Store = (*Engine)(nil)

// marshalPlain encodes v as compact JSON without HTML escaping, the form
// SQL JSON functions produce.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
