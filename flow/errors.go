package flow

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidGraph: the graph is malformed (unknown node, unreachable node,
	// bad router target).
	ErrInvalidGraph = errors.New("flow: invalid graph")
	// ErrNodeFailed: a node returned an error after its retries.
	ErrNodeFailed = errors.New("flow: node failed")
	// ErrInterrupted: the run stopped to ask for input; resume with a value.
	ErrInterrupted = errors.New("flow: interrupted")
	// ErrRecursionLimit: a subgraph's run reached its step limit (a run of
	// the graph itself stops with stop reason "recursion_limit" instead).
	ErrRecursionLimit = errors.New("flow: recursion limit reached")
	// ErrNothingToResume: Resume found no checkpoint in the thread's
	// namespace (the error also matches store.ErrNotFound). Resuming a run
	// that finished returns at once with its result and runs nothing.
	ErrNothingToResume = errors.New("flow: nothing to resume")
)

// InterruptError is what Interrupt returns when no resume value is waiting:
// the node returns it, and the run stops with stop reason "interrupt" and
// the payload stored in the checkpoint.
type InterruptError struct {
	Node    string
	Payload json.RawMessage
	// Static: the node stopped at a pause inside it with no value of its
	// own — a subgraph's pause before or after one of its nodes — so the
	// run's pause is a pause before the node, not an interrupt (Payload
	// is the subgraph's pause).
	Static bool
	// ResponseSchema is the JSON Schema of the answer the node expects
	// (WithResponseSchema), nil for any.
	ResponseSchema json.RawMessage
}

func (e *InterruptError) Error() string {
	return fmt.Sprintf("flow: node %q interrupted: %s", e.Node, e.Payload)
}

// Unwrap makes errors.Is(err, ErrInterrupted) true.
func (e *InterruptError) Unwrap() error { return ErrInterrupted }

// NodeError says which node failed and on which attempt.
type NodeError struct {
	Node     string
	Key      string // idempotency key of the task
	Attempts int
	Err      error
}

func (e *NodeError) Error() string {
	return e.Context() + ": " + fmt.Sprint(e.Err)
}

// Context is what the error says before the node's own error: which
// node failed, as which task, after how many attempts.
func (e *NodeError) Context() string {
	return fmt.Sprintf("flow: node %q (%s) failed after %d attempt(s)", e.Node, e.Key, e.Attempts)
}

// Unwrap returns ErrNodeFailed and the cause.
func (e *NodeError) Unwrap() []error { return []error{ErrNodeFailed, e.Err} }

func joinErrors(errs []error) error { return errors.Join(errs...) }
