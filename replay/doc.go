// Package replay re-executes a thread's recorded runs with the current
// code — an agent file, a pipeline or a Go graph, as a runs.Assistant —
// and reports the first checkpoint where the new run departs from the
// recorded one, or that it matched to the end.
//
// Nothing outside is called: every model call and tool call the new run
// makes is answered from the call records of the recorded step it stands
// for (flow.Tape; the records are the "call/<n>" entries of the step's
// journal that package agent writes, by task and position). A call with
// no record, a call of another kind or name, and a call whose request
// differs from the recorded one (the model's prompt, tools or messages;
// a tool's name or arguments) are departures: the report names the
// first, with the recorded and the new request records and their RFC
// 6902 difference. What a run receives from outside the code — its
// input, an outside update, a fork, the answer an interrupt was resumed
// with — is taken from the recording as it was.
//
// Thread never writes to the thread it replays: the new run goes into an
// in-memory store, or, with Options.Into, into a new thread of the same
// store (a branch to compare in the UI; refused when that thread exists).
// Options.From starts at a checkpoint of the head's branch, whose state
// is loaded as recorded.
package replay
