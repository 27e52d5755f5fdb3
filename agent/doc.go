// Package agent is the LLM side of Cairn: the Model interface and its
// messages, tool calls and inference results; structured output validated
// against JSON Schema (with the first-balanced-object fallback and re-asks);
// typed tools that read and write the run's state; and the tool loop.
//
// Providers live in subpackages (model/scripted now; OpenAI-compatible and
// Anthropic next), all behind Model, all returning the typed errors of this
// package so retries and messages are the same whatever the provider. An API
// key never appears in an error, a log line or the state.
package agent
