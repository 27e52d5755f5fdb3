package store

import (
	"time"

	"github.com/cairn-dev/cairn/state"
)

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
	// ExternalID is the fork checkpoint's (Checkpoint.ExternalID).
	ExternalID string
}

// PruneRequest deletes old history, never what a kept checkpoint needs to
// be rebuilt, the state an interrupt waits on, or the pending writes that
// keep a resumed step from running again.
type PruneRequest struct {
	// Thread limits pruning to one thread; empty prunes all.
	Thread string
	// KeepLast, when not 0, keeps the newest KeepLast checkpoints of each
	// branch of each namespace (a branch ends at a checkpoint nothing was
	// built on: the head, a fork's tip, a paused branch) and the
	// checkpoint a kept failed or paused one resumes from (Meta.StepOf);
	// every older one goes with its pending writes. The oldest kept
	// checkpoint of a branch whose history below goes is given a snapshot
	// of its own state, in the transaction of the deletion, so that every
	// kept checkpoint still rebuilds.
	KeepLast int
	// OlderThan, when not 0, deletes whole threads with no activity (no
	// checkpoint, or creation for an empty thread) for that long.
	OlderThan time.Duration
	// Expired deletes whole threads past their own time to live (ThreadTTL).
	Expired bool
	// RunLogsOlderThan, when not 0, deletes the event logs of runs that
	// ended longer ago than this (their records stay; a client can no
	// longer replay their streams).
	RunLogsOlderThan time.Duration
	// Now is the time OlderThan and Expired count from (default: now).
	Now time.Time
}

// DefaultRunLogRetention is how long the servers' sweeps keep the event
// log of a run that ended (cairn serve and cairn worker,
// --retention-run-logs): long enough for a client to come back to a
// stream it lost, not so long that logs outweigh the threads.
const DefaultRunLogRetention = 24 * time.Hour

// PruneResult reports what Prune deleted.
type PruneResult struct {
	// Threads is the number of threads that lost checkpoints; Checkpoints
	// how many they lost, Bytes their stored size (patches, snapshots,
	// metadata).
	Threads     int
	Checkpoints int64
	Bytes       int64
	// Rebased is the number of kept checkpoints given a snapshot of their
	// own state because the history below them went (the oldest kept of
	// each branch), RebasedBytes the size of those snapshots.
	Rebased      int64
	RebasedBytes int64
	// RunLogs is the number of run event logs deleted: those that referred
	// to a checkpoint this prune deleted, and those of runs that ended
	// before RunLogsOlderThan.
	RunLogs int64
	// InboxEntries is the number of inbox entries deleted (Inbox): those
	// every kept checkpoint of their thread's root namespace consumed.
	InboxEntries int64
	// Deleted lists the threads deleted whole (OlderThan, Expired).
	Deleted []string
	// Busy lists the threads left as they were: written to throughout
	// (each try found a new checkpoint), or, for deletion, with a run
	// pending or running or a pause waiting for an answer.
	Busy []string
}
