package driver

import (
	"context"
)

// StoredRows counts stored rows and the bytes of their stored data.
type StoredRows struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

// ThreadUsage is what a backend counts for a thread beside its checkpoint
// rows (StorageBackend).
type ThreadUsage struct {
	// PendingWrites by namespace.
	PendingWrites map[string]StoredRows
	// Runs are the thread's run records; RunEvents the events of their
	// logs. Zero for a backend that keeps no run log.
	Runs, RunEvents StoredRows
}

// StorageBackend is a Backend that measures what it keeps for a thread
// beside its checkpoint rows, for ThreadStorageOf (every built-in backend
// does). The engine walks the checkpoint rows itself, a page at a time.
type StorageBackend interface {
	// ThreadUsage counts a thread's pending writes (by namespace), runs
	// and run events, and sums the lengths of their stored data (a write's
	// update, a run's record, an event's data, as stored); ErrNotFound
	// when the thread does not exist.
	ThreadUsage(ctx context.Context, thread string) (ThreadUsage, error)
}
