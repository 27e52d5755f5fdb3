package store

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
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
	b       driver.Backend
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
func New(b driver.Backend, opts Options) *Engine {
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
	if a, ok := b.(driver.SnapshotAttacher); ok && !opts.InlineSnapshots && !readOnly(b) {
		e.late = newLateSnaps(a)
		go e.lateWorker()
	}
	return e
}

// Backend returns the backend the engine writes to.
func (e *Engine) Backend() driver.Backend { return e.b }

func (e *Engine) check(thread, ns string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := ValidateThreadID(thread); err != nil {
		return err
	}
	return ValidateNamespace(ns)
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
