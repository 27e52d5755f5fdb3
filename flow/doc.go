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
//     ("thread/seq/node", seq being the checkpoint the step reads).
//   - One writer per thread: a runner whose head is stale gets
//     store.ErrConflict and writes nothing.
//   - Interrupts (Interrupt, or static ones before/after named nodes) stop
//     the run with stop reason "interrupt" and an INTERRUPTED checkpoint
//     holding the payload; Resume with a value continues exactly there.
//   - Cancelling the context stops the run with stop reason
//     "cancelled_immediate"; nothing of the unfinished step is committed.
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
