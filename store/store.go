package store

import (
	"context"
	"iter"
)

// Store is the persistence contract the runner, CLI and servers use.
// Implementations are safe for concurrent use.
type Store interface {
	// CreateThread creates an empty thread; ErrConflict if it exists.
	CreateThread(ctx context.Context, t Thread) (Thread, error)
	// Thread returns a thread with its head.
	Thread(ctx context.Context, id string) (Thread, error)
	// Threads lists threads by id, one query per page.
	Threads(ctx context.Context, f ThreadFilter) iter.Seq2[Thread, error]
	// ListThreads returns one page of threads, selected, ordered and paged
	// through the store's indexes; see ThreadSearch.
	ListThreads(ctx context.Context, s ThreadSearch) ([]Thread, error)
	// CountThreads counts the threads a search selects (its order and
	// page aside).
	CountThreads(ctx context.Context, s ThreadSearch) (int64, error)
	// SetMetadata replaces a thread's metadata (nil: none) and returns
	// the thread; ErrNotFound.
	SetMetadata(ctx context.Context, id string, md map[string]any) (Thread, error)
	// DeleteThread deletes a thread and all its checkpoints.
	DeleteThread(ctx context.Context, id string) error
	// Append commits a checkpoint extending cp.Parent, which must be the
	// head of cp's namespace (0 for an empty one); it creates the thread if
	// needed. The returned checkpoint has Seq and CreatedAt set.
	Append(ctx context.Context, cp Checkpoint) (Checkpoint, error)
	// PutWrites records pending writes for the step after checkpoint seq.
	PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error
	// Writes returns the pending writes for the step after checkpoint seq.
	Writes(ctx context.Context, thread, ns string, seq int64) ([]Write, error)
	// Load returns a checkpoint with its full state.
	Load(ctx context.Context, r LoadRequest) (Checkpoint, error)
	// History walks checkpoints newest first.
	History(ctx context.Context, r HistoryRequest) iter.Seq2[Checkpoint, error]
	// Fork branches from a checkpoint; see ForkRequest.
	Fork(ctx context.Context, r ForkRequest) (Checkpoint, error)
	// Namespaces lists the namespaces of a thread that have checkpoints,
	// by name (the root "" first); ErrNotFound when the thread does not
	// exist.
	Namespaces(ctx context.Context, thread string) ([]NamespaceInfo, error)
	// Prune deletes old checkpoints and idle threads; see PruneRequest.
	Prune(ctx context.Context, r PruneRequest) (PruneResult, error)
	// CopyThread copies a thread, its whole history and pending writes,
	// into a new one.
	CopyThread(ctx context.Context, from, to string) (Thread, error)
	// Close releases resources; pending commits finish first.
	Close() error
}
