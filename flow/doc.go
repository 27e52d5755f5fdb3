// Package flow builds and runs graphs of steps over a durable store.
//
// A graph has nodes (Go functions that read the state and return a partial
// update), static edges, routers (functions that choose what runs next from
// the new state), and START/END. A step runs every scheduled node — in
// parallel when there are several, or the same node many times with their
// own inputs (Send) — merges their updates through the schema's reducers in
// task order, and commits one checkpoint holding the patch, the nodes, the
// status and the next schedule.
//
// # Guarantees
//
//   - A step is atomic: its merged update and its schedule commit together.
//     A step that fails writes a FAILED checkpoint with the error (state
//     unchanged); the updates of its siblings that finished are kept as
//     pending writes and are not run again on resume.
//   - A completed step never runs again on Resume. A step cut short by a
//     crash runs again, with the same idempotency key per task
//     ("thread/seq/node", seq being the checkpoint the step reads;
//     "thread/ns/seq/node" outside the root namespace).
//   - Budgets and the step limit hold across resumes: every checkpoint
//     records the namespace's cumulative usage (store.Meta.Usage: steps,
//     tokens, runtime) and the usage where its run started
//     (Meta.Extra["run_usage"]). A run is an Invoke or RunFrom plus every
//     Resume after a crash, a failed step (failed steps count) or a budget
//     stop, so a crash-looping run still stops at its budget (raise the
//     budget with RunOptions to go on); a Resume after an interrupt or an
//     UpdateState, a new Invoke (the next turn of a conversation) and a
//     RunFrom start new runs. A fork's usage counters carry on from
//     the checkpoint it branches from. A step cut short by a crash counts
//     too: each Resume leaves a marker (a pending write) before its first
//     step, so a node that kills its process every time still exhausts
//     the budget.
//   - A run stops after DefaultRecursionLimit (25) steps, as LangGraph's
//     recursion limit, unless Options.RecursionLimit,
//     RunOptions.RecursionLimit or Graph.WithRecursionLimit set another
//     (negative: no limit; the default yields to a state that bounds its
//     runs itself, Rules.Bounded), with stop reason "recursion_limit" (a subgraph
//     fails its parent's node with ErrRecursionLimit), so a cycle without
//     a budget cannot run forever.
//   - A node that fails with an error naming a stop reason (StopReasoner,
//     as agent.ProviderError for context_overflow) stops the run with it.
//   - One writer per thread: a runner whose head is stale gets
//     store.ErrConflict and writes nothing.
//   - Interrupts (Interrupt, or static ones before/after named nodes) stop
//     the run with stop reason "interrupt": a node's with an INTERRUPTED
//     checkpoint holding the payload; a pause before or after a node on
//     the commit of the step that reaches it (its metadata says the run
//     paused: StopReason interrupt, Interrupt {before|after, node}), as
//     LangGraph writes no checkpoint for it — only a Resume after a crash
//     into such a pause writes one. Resume with a value continues
//     exactly there.
//     A Resume from a pause, or from an outside update (UpdateState,
//     UpdateStateAt: a person edited the state at the pause), runs its
//     first step without the pauses before it, as LangGraph marks the
//     interrupt seen when a run resumes without input; the steps after it
//     pause as usual, and so does Invoke. A run cut short by a crash, a
//     cancel or a budget had not paused: its Resume pauses.
//   - Cancelling the context stops the run with stop reason
//     "cancelled_immediate"; nothing of the unfinished step is committed.
//
// Streaming: Stream, StreamResume and StreamFrom run as Invoke, Resume and
// RunFrom do and yield the run's events as they happen (iter.Seq2), in the
// modes asked for (values: the whole state after each step, shared, not
// copied; updates; custom: what nodes send with Emit; checkpoints; tasks;
// debug: everything), then a result event with the Result and the run's
// error. Interrupt and error events are always part of a stream;
// subgraph events (with their Namespace) only with StreamOptions.Subgraphs.
// Backpressure: events wait in a small buffer (StreamOptions.Buffer); when
// it is full the run waits for the consumer, so a slow consumer slows the
// run and memory stays bounded, and no event is dropped. Breaking out of
// the loop cancels the run (nothing of the step in flight is committed).
// Token streaming from models comes with streaming providers.
//
// Extension points: the runner knows no field of any particular state.
// Rules (Graph.WithRules, Options.Rules) give a kind of state its own stop
// rule, operations added to every step (a step counter) and a say over the
// default step limit; package flow/baserules gives state.Base's built-ins
// (stop_reason, final_result, max_steps, current_step) their meaning this
// way. Options.StopWhen adds stop criteria, Options.Observer sees every
// event, and a node's RetryPolicy decides what is retried (backoff with
// full jitter).
//
// Secrets: with Options.Redact set, node updates, inputs, UpdateState
// updates, errors, interrupt payloads, pending writes, Send inputs, events
// and returned errors are redacted before anything is committed or emitted
// (package redact). Updates are redacted before they are applied, so the
// state a run holds in memory is byte for byte the state it stored.
//
// Durability: "sync" commits each step before the next starts; "async"
// commits in order in the background while the next step runs and flushes
// before returning; "exit" writes the run as one checkpoint when it stops
// (a crash loses the whole run; idempotency keys then count steps from the
// last committed checkpoint).
package flow
