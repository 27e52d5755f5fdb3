// Package server serves the LangGraph Platform HTTP API over a Cairn
// store, so that the official LangGraph SDKs, and the web UI it embeds at
// /ui/, drive Cairn threads and runs.
//
// A Server is an http.Handler (cairn serve wraps one). Its assistants are
// agent files and pipelines (LoadAssistants) and Go graphs (Graph). Runs
// execute in the server's process, one at a time per thread (the others
// queue, or are refused, as the request's multitask strategy says); each
// has an event log kept in memory for live readers and in the store
// (store.RunLog) for readers that come back later, so a stream resumes
// from Last-Event-ID with nothing repeated and nothing lost. Start picks up
// the runs an earlier server left unfinished on the store; Close stops the
// runs in flight without committing their current step, for the next
// Start.
//
// With Config.Keys set, every request but /ok, /info, /openapi.json and
// the UI's files needs an API key (NewKey makes one; the store keeps its
// hash), whose tenant scopes everything the request sees: another tenant's
// thread, run or interrupt is not found. Pending interrupts are listed
// across threads and answered with a flow.Approval, recorded with who
// answered and when in the next checkpoint.
//
// The API's shapes, what maps to what, and what is not built are in
// docs/server.md.
package server
