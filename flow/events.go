package flow

import (
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// EventKind names what happened.
type EventKind string

// Event kinds.
const (
	EventRunStart  EventKind = "run_start"
	EventRunEnd    EventKind = "run_end"
	EventStepStart EventKind = "step_start"
	EventStepEnd   EventKind = "step_end"
	EventNodeStart EventKind = "node_start"
	EventNodeEnd   EventKind = "node_end"
	EventInterrupt EventKind = "interrupt"
	EventError     EventKind = "error"
	EventTokens    EventKind = "tokens"
	EventUpdate    EventKind = "update"
	// EventValues carries the whole state after a step (State), for
	// Stream's values mode; EventCheckpoint a commit (Seq, Parent, Status,
	// Next), for checkpoints mode; EventCustom what a node sent with Emit.
	// Runners emit them only while streaming them.
	EventValues     EventKind = "values"
	EventCheckpoint EventKind = "checkpoint"
	EventCustom     EventKind = "custom"
	EventMessage    EventKind = "message"
	// EventResult ends a Stream: Result is how the run ended.
	EventResult EventKind = "result"
)

// Event is one thing a run did, for progress displays and traces. An
// update event's Payload is a node's update; a step_end event's the step's
// patch. A step_end event's Seq is the checkpoint the step committed; under
// DurabilityExit it is 0, as the run's steps become one checkpoint written
// when the run stops (the run_end event names it).
type Event struct {
	Kind       EventKind        `json:"kind"`
	Time       time.Time        `json:"ts"`
	RunID      string           `json:"run_id"`
	Thread     string           `json:"thread"`
	Seq        int64            `json:"seq,omitempty"`
	Node       string           `json:"node,omitempty"`
	Nodes      []string         `json:"nodes,omitempty"`
	Key        string           `json:"key,omitempty"`
	Attempt    int              `json:"attempt,omitempty"`
	Duration   time.Duration    `json:"duration_ns,omitempty"`
	Tokens     store.Tokens     `json:"tokens,omitzero"`
	Payload    json.RawMessage  `json:"payload,omitempty"`
	StopReason state.StopReason `json:"stop_reason,omitempty"`
	Err        string           `json:"error,omitempty"`
	// Namespace is where the event happened: "" for the root, the
	// subgraph's, gate's or handoff's namespace otherwise.
	Namespace string `json:"ns,omitempty"`
	// State is the whole state after a step (values events): the
	// immutable document itself, shared, not a copy.
	State *state.Doc `json:"values,omitempty"`
	// Committed: the checkpoint Seq names was committed before the event
	// was emitted (values and checkpoint events, durability sync), so it
	// holds State; a consumer may keep a reference to it instead of a copy.
	Committed bool `json:"-"`
	// Parent, Status, Next and Source describe a commit (checkpoint
	// events); Source is its store.Meta.Source ("input": a run's input).
	Parent int64    `json:"parent,omitempty"`
	Status string   `json:"status,omitempty"`
	Next   []string `json:"next,omitempty"`
	Source string   `json:"source,omitempty"`
	// Result is how the run ended (the result event that ends a Stream).
	Result *Result `json:"-"`
	// Redacted counts the node updates of the run a secret was redacted
	// from before anything stored or showed them (run_end events).
	Redacted int `json:"redacted,omitempty"`
	// Static marks an interrupt event of Options.InterruptBefore or
	// InterruptAfter: a pause at a node, which carries no value of a
	// node's (its Payload names the node).
	Static bool `json:"static,omitempty"`
	// ResponseSchema is an interrupt's response schema (WithResponseSchema,
	// Options.ResponseSchemas), nil for none.
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
}

// emit delivers an event to the observer, one at a time.
func (r *Runner) emit(ev Event) {
	if r.opts.Observer == nil {
		return
	}
	ev.Time = r.opts.Now()
	ev.Namespace = r.opts.Namespace
	if r.opts.Redact != nil {
		r.redactEvent(&ev)
	}
	r.obs.Lock()
	defer r.obs.Unlock()
	r.opts.Observer(ev)
}
