package store

import "encoding/json"

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
	// Inbox is the highest entry of the thread's inbox (store.Inbox) the
	// checkpoint's lineage consumed: entries after it are pending.
	Inbox int64 `json:"inbox,omitempty"`
}

// Task is one scheduled node with its own input (nil: the shared state).
type Task struct {
	Node  string          `json:"node"`
	Input json.RawMessage `json:"input,omitempty"`
}
