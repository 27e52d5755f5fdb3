// Package spec reads the files users write — agent files (Markdown with
// YAML front matter, Quick Agent's format) and, next, gate pipelines — and
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
package spec
