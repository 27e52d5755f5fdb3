package store

import (
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

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
	// ExternalID is an id the writer gives the checkpoint (the LangGraph
	// saver: LangGraph's checkpoint id), at most MaxExternalID bytes;
	// ExternalIDs finds the checkpoint by it. Empty: none.
	ExternalID string
	// Writes, on Append, are pending writes of checkpoint WritesAt of the
	// same thread namespace — the checkpoint the step read — stored in the
	// append's transaction as PutWrites stores them, and only if the
	// checkpoint is (a step's call records commit with it). Reads leave
	// them empty: Writes(WritesAt) returns them.
	Writes   []Write
	WritesAt int64
}

// Ref returns the checkpoint's reference.
func (c *Checkpoint) Ref() Ref { return Ref{Thread: c.Thread, Namespace: c.Namespace, Seq: c.Seq} }

// Write is a pending write: the update of one node of a step that has not
// committed yet (a parallel sibling failed or the process stopped). The
// runner re-applies pending writes on resume instead of re-running the node.
// Task is unique within the step (the node name and index), Node the node
// that produced the update, Update the node's update as JSON.
type Write = driver.Write
