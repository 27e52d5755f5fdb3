package replay

import (
	"encoding/json"
	"errors"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// ErrDeparted wraps the error a replayed call returns when it departs
// from the recording (no record, another call, or a request that
// differs); the node that made it sees it as the call's failure.
var ErrDeparted = errors.New("replay: the new run departed from the recording")

// Options configure a replay.
type Options struct {
	// Assistant is the current code the thread's runs are re-executed
	// with (runs.LoadAssistant for an agent or pipeline file, runs.Graph
	// for a Go graph). Required.
	Assistant runs.Assistant
	// Namespace is the namespace replayed ("" the root). Its checkpoints
	// are compared; the nested runs of its steps (handoffs, gates,
	// subgraphs) run again inside them, their calls answered from their
	// own namespaces' records of the same seqs.
	Namespace string
	// From starts the replay at this checkpoint of the head's branch
	// (its state and everything before it copied as recorded); 0 starts
	// at the beginning of the recorded history.
	From int64
	// Into writes the new run to this new thread of the same store (with
	// the replayed thread's tenant and metadata); it must not exist.
	// Empty: an in-memory store, dropped when Thread returns.
	Into string
}

// Report is what a replay found.
type Report struct {
	// Thread is the thread replayed, Namespace its namespace, From the
	// checkpoint the replay started at (0: the beginning).
	Thread    string `json:"thread"`
	Namespace string `json:"namespace,omitempty"`
	From      int64  `json:"from,omitempty"`
	// Into is the thread the new run was written to ("" in memory).
	Into string `json:"into,omitempty"`
	// Matched: every recorded checkpoint from From to the head was
	// written again the same (status, nodes, state) and every call asked
	// what was recorded.
	Matched bool `json:"matched"`
	// Checkpoints counts the recorded checkpoints compared and found
	// equal; Calls the calls answered from the recording.
	Checkpoints int `json:"checkpoints"`
	Calls       int `json:"calls"`
	// Departure is the first departure (nil when Matched).
	Departure *Departure `json:"departure,omitempty"`
}

// Departure is the first checkpoint where the new run differs from the
// recorded one.
type Departure struct {
	// Seq is the recorded checkpoint (0: the new run went on past the
	// recording's end), NewSeq the new run's checkpoint in its place (0:
	// the new run stopped short).
	Seq    int64 `json:"seq"`
	NewSeq int64 `json:"new_seq"`
	// Node is what ran in the recorded step; NewNode in the new one.
	Node    string `json:"node,omitempty"`
	NewNode string `json:"new_node,omitempty"`
	// Reason says what differs, in words.
	Reason string `json:"reason"`
	// StateDiff turns the recorded state into the new one (RFC 6902).
	StateDiff state.Patch `json:"state_diff,omitempty"`
	// Call is the first call of that step whose request differs, if any.
	Call *CallDeparture `json:"call,omitempty"`
	// Error is the new run's error, if it ended with one.
	Error string `json:"error,omitempty"`
}

// CallDeparture is the first call whose request differs from the one
// recorded at its place.
type CallDeparture struct {
	// Node is the calling task's node and Namespace its namespace; Index
	// the call's position among the task's calls; Kind and Name the new
	// call's ("model", "model/0"; "tool", "tool/0.1").
	Node      string `json:"node"`
	Namespace string `json:"namespace,omitempty"`
	Index     int    `json:"index"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// Reason says what differs.
	Reason string `json:"reason"`
	// Recorded and New are the two request records (nil Recorded: the
	// call was not recorded); Diff turns the recorded one into the new.
	Recorded json.RawMessage `json:"recorded,omitempty"`
	New      json.RawMessage `json:"new,omitempty"`
	Diff     state.Patch     `json:"diff,omitempty"`

	newReadSeq int64 // the root step it happened in (the seq it read)
}

// checkpointsOf is a branch of a namespace, oldest first.
type chain []store.Checkpoint
