// Package tracefile exports a thread's history in the layouts other tools read.
//
// The trace layout is QitOS's: manifest.json (run id, status, summary with
// stop reason, final result, step count and failure report), events.jsonl
// (one line per checkpoint: run_id, step_id, phase, ok, payload, error, ts)
// and steps.jsonl (one line per step: step_id, nodes, the update as RFC 6902
// operations, state_diff as {field: {before, after}}, timings, tokens). It
// is built from the stored checkpoints alone, so it can be exported at any
// time, by any process, for runs that crashed too.
package tracefile
