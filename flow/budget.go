package flow

import "time"

// Budget limits a run. Zero fields are unlimited.
//
// A run is an Invoke (or a RunFrom) together with every Resume after a
// crash, a failed step or a budget stop: its steps (a step cut short by
// a crash included), tokens and runtime are counted from the checkpoints
// (store.Meta.Usage), so a run that crashes and is resumed over and over
// still stops at its budget. A Resume that follows an interrupt or an
// UpdateState starts a new run, as do Invoke (a new turn) and RunFrom (a
// fork, whose usage counters carry on from the checkpoint it branches
// from). MaxRuntime counts the time spent running, not the time between a
// crash and its resume. A budget stop is put on record in a checkpoint of
// its own (SourceStop); a Resume with a larger budget goes on from it.
type Budget struct {
	MaxSteps   int
	MaxRuntime time.Duration
	MaxTokens  int64
}

// Override returns b with the fields set in o replacing b's (a task's
// budget over the runner's default).
func (b Budget) Override(o Budget) Budget {
	if o.MaxSteps != 0 {
		b.MaxSteps = o.MaxSteps
	}
	if o.MaxRuntime != 0 {
		b.MaxRuntime = o.MaxRuntime
	}
	if o.MaxTokens != 0 {
		b.MaxTokens = o.MaxTokens
	}
	return b
}
