package driver

import (
	"context"
	"encoding/json"
)

// Row is a checkpoint as a backend stores it. Blobs are opaque to backends:
// the engine encodes and checks them.
type Row struct {
	Thread    string
	Namespace string
	Seq       int64
	Parent    int64
	// Base is the seq of the row whose snapshot this row's state replays
	// from (the row itself when it has a snapshot).
	Base int64
	// Since is the stored patch bytes from Base (exclusive) to this row
	// (inclusive) along the ancestry.
	Since int64
	// BaseSize is the stored size of Base's snapshot.
	BaseSize  int64
	Status    Status
	CreatedAt int64 // Unix nanoseconds
	Meta      []byte
	Patch     []byte // nil when not requested
	Snapshot  []byte // nil when absent or not requested
	// HasSnapshot is set on rows that store a snapshot, requested or not.
	HasSnapshot bool
	// Sum is the row's checksum (RowChecksum): it covers every field above
	// except Snapshot, which carries its own CRC-32C and whose size is
	// BaseSize. The engine sets it; backends store it and return it.
	Sum uint32
	// ExternalID is the id the checkpoint's writer gave it
	// (Checkpoint.ExternalID; empty: none). A backend that keeps an
	// ExternalIDIndex stores and returns it; it is index data, not covered
	// by Sum.
	ExternalID string
	// Create, on a first row (Seq 1), is the thread record Insert creates
	// in the same transaction when the thread does not exist yet.
	Create *ThreadRecord
	// NewThread makes Insert fail with ErrConflict, writing nothing, when
	// the thread already exists: Create must be a new thread (a fork into a
	// new thread creates the thread and its first row atomically).
	NewThread bool
	// Fence, when not 0, is the fencing token of the thread's lease the
	// append was made under (WithFence): Insert fails with ErrFenced,
	// writing nothing, unless the lease still has this token. A backend
	// with a fence must keep leases (LeaseStore). Not stored.
	Fence int64
	// Head, on a root-namespace row that becomes its thread's head, sets
	// the thread's listing columns in the row's transaction: its status
	// (Head.Status, and the status counters), and the row's time as the
	// time of that status and as the thread's touch time. The engine sets
	// it only when the status changes, or the touch is TouchSlack old
	// (HeadUpdate); nil leaves the thread record as it is. Not stored.
	Head *HeadUpdate
	// Writes, when not empty, are pending writes of row WritesAt of the
	// row's thread namespace (PutWrites's), stored in Insert's
	// transaction — and only if the row is: a step's call records commit
	// with it. Not stored in the row.
	Writes   []Write
	WritesAt int64
}

// SnapshotAttacher is a Backend that can give a row already stored the
// snapshot of its state, so that the engine encodes and writes a snapshot
// after the commit of its row instead of inside it (docs/DESIGN.md, "Late
// snapshots").
type SnapshotAttacher interface {
	// AttachSnapshot stores r.Snapshot as the snapshot of row (r.Thread,
	// r.Namespace, r.Seq) and sets the row's HasSnapshot, Base, Since,
	// BaseSize and Sum to r's, in one transaction, if the row is still
	// stored with checksum old. Otherwise (the row was deleted, or deleted
	// and written again) it writes nothing and reports false.
	AttachSnapshot(ctx context.Context, r Row, old uint32) (bool, error)
}

// BaseFits reports whether row r may be stored on a parent whose stored
// Base is parentBase (Backend.Insert): r replays from the parent's base,
// from the parent (a late snapshot), or from its own snapshot.
func BaseFits(r *Row, parentBase int64) bool {
	return r.Base == parentBase || r.Base == r.Parent || r.Base == r.Seq
}

// Rebase is a kept row a prune rewrites in the transaction that deletes
// the rows below it (Backend.DeleteRanges): the oldest kept row of a
// branch gets the snapshot of its own state (Row.HasSnapshot, Snapshot,
// Base its own seq), and the kept rows above it that replayed from a
// deleted snapshot replay from it (Base, Since, BaseSize). Every other
// field stays as stored; Row.Sum is the checksum of the row rewritten.
type Rebase struct {
	// Row is the row as it is to be stored; Snapshot is written when
	// HasSnapshot is set and it is not nil.
	Row Row
	// Old is the checksum the row must still have: a row changed since
	// (a late snapshot attached, another prune) fails the prune with
	// ErrConflict.
	Old uint32
}

// ThreadRecord is a thread as a backend stores it.
type ThreadRecord struct {
	ID        string
	Tenant    string
	Metadata  []byte // JSON object or nil
	CreatedAt int64  // Unix nanoseconds
	Head      int64  // newest root-namespace seq; 0 when empty
	HeadAt    int64  // CreatedAt of the head row
	// Status is the thread's status as its listing columns hold it (set by
	// Row.Head; idle for a new thread). Not covered by Sum: it is index
	// data, kept in step with the head.
	Status ThreadStatus
	// Sum is the record's checksum (ThreadChecksum) over ID, Tenant,
	// Metadata and CreatedAt.
	Sum uint32
}

// NamespaceRecord describes the rows of one namespace of a thread.
type NamespaceRecord struct {
	Name  string
	Head  int64 // newest seq
	Count int64 // rows stored (fewer than Head after pruning)
}

// ThreadQuery selects a page of threads ordered by id.
type ThreadQuery struct {
	After  string // ids greater than this
	Limit  int
	Tenant string
	// Metadata: top-level key → compact JSON scalar it must equal, for a
	// store of a format before 6 (read-only); "null" matches a key absent
	// or null. Backends pass keys and values as parameters, never as query
	// text.
	Metadata map[string]json.RawMessage
	// Meta: the same filters in the metadata index's form, for a store
	// that keeps the index.
	Meta []MetaFilter
}

// SeqRange is the seqs From to To, both included.
type SeqRange struct{ From, To int64 }

// RowQuery selects rows of one thread namespace.
type RowQuery struct {
	Thread    string
	Namespace string
	From, To  int64 // inclusive; To 0 means no upper bound
	Desc      bool
	Limit     int  // 0: no limit
	Snapshots bool // fill Snapshot
}

// Backend is the row-level storage a backend implements. It knows nothing
// of documents, patches or the snapshot policy. Implementations must be
// safe for concurrent use.
type Backend interface {
	// CreateThread inserts a thread record; ErrConflict if the id exists.
	CreateThread(ctx context.Context, t ThreadRecord) error
	// Thread returns a thread record with its head; ErrNotFound.
	Thread(ctx context.Context, id string) (ThreadRecord, error)
	// Threads returns one page of threads.
	Threads(ctx context.Context, q ThreadQuery) ([]ThreadRecord, error)
	// UpdateThread replaces a thread record's metadata and checksum (the
	// other fields stay); ErrNotFound.
	UpdateThread(ctx context.Context, t ThreadRecord) error
	// DeleteThread deletes a thread, its rows and its writes (and its runs,
	// for a backend that keeps a RunLog); ErrNotFound.
	DeleteThread(ctx context.Context, id string) error
	// Insert adds a row atomically (row, snapshot and r.Create together).
	// It fails with ErrConflict, writing nothing, when the thread namespace
	// already has a row with that seq, when r.Parent is not 0 and no row has
	// that seq, or when r.NewThread is set and the thread exists. It fails
	// the same way when r.Base is none of the parent's Base, the parent
	// itself and r itself: the writer's idea of the parent is older than a
	// prune that rebased it (see Rebase). On a backend where transactions
	// do not run one at a time, the check holds a lock on the parent row
	// until the commit, so that a prune rebasing or deleting it waits.
	Insert(ctx context.Context, r Row) error
	// Rows returns whole rows (every field but Snapshot, which only with
	// q.Snapshots) in seq order (descending with Desc).
	Rows(ctx context.Context, q RowQuery) ([]Row, error)
	// Namespaces lists the namespaces of a thread that have rows, by name.
	Namespaces(ctx context.Context, thread string) ([]NamespaceRecord, error)
	// DeleteRanges deletes the rows (their snapshots and writes) of a
	// thread namespace whose seq lies in one of the ranges and rewrites
	// the kept rows of rebase, in one transaction, returning how many rows
	// went. It fails with ErrConflict, changing nothing, unless the
	// namespace's newest seq is still head — a row added since the caller
	// chose the ranges may need one of them — and every row of rebase is
	// still stored with its Old checksum.
	DeleteRanges(ctx context.Context, thread, ns string, head int64, ranges []SeqRange, rebase []Rebase) (int64, error)
	// PutWrites stores pending writes, replacing ones with the same task.
	PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error
	// Writes returns pending writes ordered by task.
	Writes(ctx context.Context, thread, ns string, seq int64) ([]Write, error)
	// Close releases resources.
	Close() error

	ThreadIndex
}

// ThreadIndex is the part of a Backend that lists threads through
// indexes kept in step with every write: each thread's tenant, creation
// time, status (Row.Head), touch time and metadata entries
// (IndexEntries), and counters of threads per status and per metadata
// entry, updated in the transactions that change them. CreateThread,
// Insert (a new thread, Row.Head), UpdateThread, DeleteThread and
// DeleteRanges (a root namespace emptied: idle, touched at creation) keep
// them.
type ThreadIndex interface {
	// ListThreads returns a page of threads, reading q.Drive's index first
	// (a backend may read another when it answers the same).
	ListThreads(ctx context.Context, q ListQuery) ([]ThreadRecord, error)
	// CountThreads counts the threads q selects (its order and page
	// aside), reading q.Drive's index.
	CountThreads(ctx context.Context, q ListQuery) (int64, error)
	// IndexCounts returns the counters of a tenant (of every tenant with
	// all): threads per status, and for each filter of meta the threads
	// that have its entry.
	IndexCounts(ctx context.Context, tenant string, all bool, meta []MetaFilter) (IndexCounts, error)
	// UnclassifiedThreads lists, by id, the threads after after whose
	// status is ThreadStatusUnknown (left by the upgrade of an encrypted
	// store).
	UnclassifiedThreads(ctx context.Context, after string, limit int) ([]string, error)
	// SetThreadStatus sets the status of a thread whose status is
	// ThreadStatusUnknown (and its status time to at); it does nothing to
	// a thread classified meanwhile, or gone.
	SetThreadStatus(ctx context.Context, id string, st ThreadStatus, at int64) error
}
