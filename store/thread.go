package store

import "time"

// Thread is one conversation or run history.
type Thread struct {
	ID        string
	Tenant    string
	Metadata  map[string]any
	CreatedAt time.Time
	// UpdatedAt is the time of the head checkpoint (CreatedAt when empty).
	UpdatedAt time.Time
	// Head is the seq of the newest root-namespace checkpoint; 0 when empty.
	Head int64
	// Status is the thread's status as its head gives it (ThreadStatusOf),
	// as the store's index holds it: set by the listings (ListThreads) and
	// Thread; ThreadStatusUnknown where the store does not keep it (a
	// store of a format before 6 opened read-only).
	Status ThreadStatus
}

// ThreadFilter selects threads. Metadata matches top-level keys by JSON
// equality of scalar values; a nil value matches a key that is absent or
// null.
type ThreadFilter struct {
	Tenant   string
	Metadata map[string]any
	// PageSize is the number of threads fetched per query (default 100).
	PageSize int
	// Limit stops after this many threads (0: all).
	Limit int
}

// NamespaceInfo describes one namespace of a thread: "" is the root; gates,
// handoffs and subgraphs have their own.
type NamespaceInfo struct {
	Name string
	// Head is the newest seq of the namespace.
	Head int64
	// Checkpoints is the number of stored checkpoints (fewer than Head once
	// old history is pruned).
	Checkpoints int64
	// UpdatedAt is the time of the head checkpoint.
	UpdatedAt time.Time
}
