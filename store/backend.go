package store

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
}

// ThreadRecord is a thread as a backend stores it.
type ThreadRecord struct {
	ID        string
	Tenant    string
	Metadata  []byte // JSON object or nil
	CreatedAt int64  // Unix nanoseconds
	Head      int64  // newest root-namespace seq; 0 when empty
	HeadAt    int64  // CreatedAt of the head row
}

// ThreadQuery selects a page of threads ordered by id.
type ThreadQuery struct {
	After  string // ids greater than this
	Limit  int
	Tenant string
	// Metadata: top-level key → compact JSON scalar it must equal. Backends
	// pass keys and values as parameters, never as query text.
	Metadata map[string]json.RawMessage
}

// RowQuery selects rows of one thread namespace.
type RowQuery struct {
	Thread    string
	Namespace string
	From, To  int64 // inclusive; To 0 means no upper bound
	Desc      bool
	Limit     int  // 0: no limit
	Payload   bool // fill Patch
	Snapshots bool // fill Snapshot
	// Lean: the caller needs only Seq, Parent, Base and the blobs it asked
	// for; backends may leave the other fields zero.
	Lean bool
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
	// DeleteThread deletes a thread, its rows and its writes; ErrNotFound.
	DeleteThread(ctx context.Context, id string) error
	// Insert adds a row atomically (row and snapshot together), creating a
	// bare thread record when the thread does not exist. It fails with
	// ErrConflict, writing nothing, when the thread namespace already has a
	// row with that seq.
	Insert(ctx context.Context, r Row) error
	// Rows returns rows in seq order (descending with Desc).
	Rows(ctx context.Context, q RowQuery) ([]Row, error)
	// Namespaces lists the namespaces of a thread that have rows.
	Namespaces(ctx context.Context, thread string) ([]string, error)
	// DeleteBelow deletes the rows (and their writes) of a thread namespace
	// with seq < below, returning how many rows went.
	DeleteBelow(ctx context.Context, thread, ns string, below int64) (int64, error)
	// PutWrites stores pending writes, replacing ones with the same task.
	PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error
	// Writes returns pending writes ordered by task.
	Writes(ctx context.Context, thread, ns string, seq int64) ([]Write, error)
	// Close releases resources.
	Close() error
}
