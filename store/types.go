package store

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/state"
)

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
}

// Status is the outcome of a step.
type Status uint8

// Step statuses. The names follow the gate pipeline files.
const (
	StatusSuccess Status = iota + 1
	StatusPartial
	StatusFailed
	StatusInterrupted
)

var statusNames = [...]string{StatusSuccess: "SUCCESS", StatusPartial: "PARTIAL", StatusFailed: "FAILED", StatusInterrupted: "INTERRUPTED"}

func (s Status) String() string {
	if s.Valid() {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s >= StatusSuccess && s <= StatusInterrupted }

// ParseStatus reads a status name (case-insensitive).
func ParseStatus(name string) (Status, error) {
	for i, n := range statusNames {
		if n != "" && strings.EqualFold(n, name) {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown status %q (SUCCESS, PARTIAL, FAILED, INTERRUPTED)", ErrInvalidArgument, name)
}

// MarshalText writes the status name.
func (s Status) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: status %d", ErrInvalidArgument, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a status name.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Tokens counts model tokens.
type Tokens struct {
	Input  int64 `json:"input,omitempty"`
	Output int64 `json:"output,omitempty"`
}

// Meta is what a checkpoint records about its step besides the state change.
type Meta struct {
	// Source says how the checkpoint came to be: "input", "update", "fork",
	// "interrupt"; empty for an ordinary step.
	Source string `json:"source,omitempty"`
	// Error is the failure of a FAILED step.
	Error string `json:"error,omitempty"`
	// Score is a validation score (gate pipelines).
	Score *float64 `json:"score,omitempty"`
	// Tokens used by the step.
	Tokens *Tokens `json:"tokens,omitempty"`
	// DurationMS is the step's wall time in milliseconds, per node.
	DurationMS map[string]float64 `json:"duration_ms,omitempty"`
	// Next lists the nodes scheduled after this step.
	Next []string `json:"next,omitempty"`
	// Tasks lists the scheduled tasks when some carry their own input
	// (fan-out with Send); Next then holds their node names.
	Tasks []Task `json:"tasks,omitempty"`
	// StepOf, on FAILED and INTERRUPTED checkpoints, is the seq whose state
	// the unfinished step read; resuming runs that step again from it.
	StepOf int64 `json:"step_of,omitempty"`
	// StopReason is set on the checkpoint where a run stopped.
	StopReason string `json:"stop_reason,omitempty"`
	// RunID names the run that wrote the checkpoint.
	RunID string `json:"run_id,omitempty"`
	// Interrupt is the payload of an interrupt.
	Interrupt json.RawMessage `json:"interrupt,omitempty"`
	// ForkedFrom names the checkpoint a fork copied.
	ForkedFrom *Ref `json:"forked_from,omitempty"`
	// Usage is what the thread's runs have consumed up to and including
	// this checkpoint, counted across resumes, so budgets hold after a
	// crash. Nil on checkpoints written before it was recorded.
	Usage *Usage `json:"usage,omitempty"`
	// Extra holds anything else.
	Extra map[string]any `json:"extra,omitempty"`
}

// Usage is cumulative consumption of a thread namespace's runs.
type Usage struct {
	// Steps counts the steps run.
	Steps int64 `json:"steps,omitempty"`
	// Tokens counts the model tokens used.
	Tokens Tokens `json:"tokens,omitzero"`
	// RuntimeMS is the wall time spent running steps, in milliseconds.
	RuntimeMS int64 `json:"runtime_ms,omitempty"`
}

// Task is one scheduled node with its own input (nil: the shared state).
type Task struct {
	Node  string          `json:"node"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Ref names a checkpoint.
type Ref struct {
	Thread    string `json:"thread"`
	Namespace string `json:"ns,omitempty"`
	Seq       int64  `json:"seq"`
}

// Checkpoint is one step of a thread's history.
type Checkpoint struct {
	Thread    string
	Namespace string
	// Seq numbers checkpoints within a thread namespace from 1.
	Seq int64
	// Parent is the seq this checkpoint extends; 0 for the first.
	Parent int64
	// Nodes ran in the step.
	Nodes  []string
	Status Status
	// Patch turns the parent's state into this checkpoint's state.
	Patch state.Patch
	// State is the full state after the step. Append requires it (the store
	// snapshots it when its policy says so); reads fill it when asked.
	State state.Doc
	// HasState reports whether State was filled by a read.
	HasState  bool
	Meta      Meta
	CreatedAt time.Time
	// Snapshot reports whether the row stores a full snapshot.
	Snapshot bool
}

// Ref returns the checkpoint's reference.
func (c *Checkpoint) Ref() Ref { return Ref{Thread: c.Thread, Namespace: c.Namespace, Seq: c.Seq} }

// Write is a pending write: the update of one node of a step that has not
// committed yet (a parallel sibling failed or the process stopped). The
// runner re-applies pending writes on resume instead of re-running the node.
type Write struct {
	Task   string          // unique within the step, e.g. the node name and index
	Node   string          // the node that produced the update
	Update json.RawMessage // the node's update, as JSON
}

// ThreadFilter selects threads. Metadata matches top-level keys by JSON
// equality of scalar values.
type ThreadFilter struct {
	Tenant   string
	Metadata map[string]any
	// PageSize is the number of threads fetched per query (default 100).
	PageSize int
	// Limit stops after this many threads (0: all).
	Limit int
}

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
	// "fork"). When Meta has neither Next nor Tasks, the fork carries the
	// schedule of checkpoint At, so resuming the fork runs what At would.
	Nodes []string
	Meta  Meta
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

// Store is the persistence contract the runner, CLI and servers use.
// Implementations are safe for concurrent use.
type Store interface {
	// CreateThread creates an empty thread; ErrConflict if it exists.
	CreateThread(ctx context.Context, t Thread) (Thread, error)
	// Thread returns a thread with its head.
	Thread(ctx context.Context, id string) (Thread, error)
	// Threads lists threads by id, one query per page.
	Threads(ctx context.Context, f ThreadFilter) iter.Seq2[Thread, error]
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
	// Prune deletes old checkpoints.
	Prune(ctx context.Context, r PruneRequest) (PruneResult, error)
	// Close releases resources; pending commits finish first.
	Close() error
}
