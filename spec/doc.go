// Package spec reads the files users write — agent files (Markdown with
// YAML front matter, Quick Agent's format) and gate pipelines (seed 001) — and
// compiles them onto the flow runner, so they get Cairn's durability,
// history and resume for free.
//
// An agent file's chain of text and structured steps becomes one node per
// step; the state is {agent_id, steps: {id: output}, final_output, input};
// each step's prompt carries the input (source and kind), its content, the
// chain state as JSON and the step's instructions. Structured steps are
// validated against their schema (with the first-JSON-object fallback).
// The final output goes to output.file; a handoff passes it to the next
// agent in the same thread. Every path stays inside the safe directory.
// Errors name the file and the line.
//
// A gate pipeline (YAML) becomes one node per gate; each gate runs its
// agent file in namespace gateN of the thread (or a registered Go step) on
// the previous gate's committed output, and its step commits the seed's
// gate file and pipeline file as state. The files in
// state_dir/<thread>/{domain}-{feature}-gate{N}-output.json and
// -pipeline.json are written after each commit from the committed head,
// under a lock on the thread's folder (flock; on systems without it,
// concurrent writers in other processes are not ordered), each replaced
// atomically; so they never contradict the store once writers are done. A
// conflict with another writer of the thread aborts the step without
// committing anything. Secrets (the defaults of package redact, the
// secrets: of the pipeline and its agent files, the API key values) are
// redacted before anything is stored, shown or written.
package spec
