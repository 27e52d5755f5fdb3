package store

import "github.com/cairn-dev/cairn/state"

// LoadRequest names a checkpoint to load with its state.
type LoadRequest struct {
	Thread    string
	Namespace string
	// Seq is the checkpoint; 0 means the head.
	Seq int64
}

// HistoryRequest walks a thread namespace newest first.
type HistoryRequest struct {
	Thread    string
	Namespace string
	// Before starts below this seq (0: from the head).
	Before int64
	// Limit stops after this many checkpoints (0: all).
	Limit int
	// PageSize is the number of checkpoints per query (default 100).
	PageSize int
	// WithState materialises the full state of every checkpoint.
	WithState bool
}

// ForkRequest copies the state at a checkpoint into a new branch: a new head
// of the same thread (Into empty) or the first checkpoint of a new thread.
//
// The checkpoint At must be a completed step: a FAILED or INTERRUPTED
// checkpoint is refused with ErrInvalidArgument naming the seq whose state
// that step read (Meta.StepOf), which is the one to fork from.
type ForkRequest struct {
	Thread    string
	Namespace string
	At        int64
	// Into is the new thread's id; empty forks within the thread. The new
	// thread and its first checkpoint are created in one transaction.
	Into string
	// Metadata is the new thread's metadata (with Into); nil inherits the
	// source thread's, so a fork knows what it runs. The tenant is always
	// the source thread's.
	Metadata map[string]any
	// Patch optionally changes the forked state.
	Patch state.Patch
	// Nodes and Meta describe the fork checkpoint (Source defaults to
	// "fork"). When Meta has neither Next nor Tasks (both nil; an empty
	// Next schedules nothing), the fork carries the
	// schedule of checkpoint At, so resuming the fork runs what At would.
	Nodes []string
	Meta  Meta
}

// PruneRequest deletes old history.
type PruneRequest struct {
	// Thread limits pruning to one thread; empty prunes all.
	Thread string
	// KeepLast keeps at least the newest KeepLast checkpoints of each
	// namespace (at least 1). Older ones go, except those the kept ones need
	// to be rebuilt (the snapshot they replay from and what lies between).
	KeepLast int
}

// PruneResult reports what Prune deleted.
type PruneResult struct {
	Threads     int
	Checkpoints int64
}
