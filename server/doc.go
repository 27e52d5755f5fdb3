// Package server serves the LangGraph Platform HTTP API over a Cairn
// store, so that the official LangGraph SDKs, and the web UI it embeds at
// /ui/, drive Cairn threads and runs.
//
// A Server is an http.Handler (cairn serve wraps one): the HTTP front end
// of a runs.Service, which creates, runs, queues and cancels the runs and
// keeps their event logs. The server decodes requests, checks their
// query, authenticates and scopes them to a tenant, writes answers and
// server-sent events (a stream resumes from Last-Event-ID with nothing
// repeated and nothing lost), and maps errors to statuses in one place
// (statusOf). Its assistants are agent files and pipelines
// (runs.LoadAssistants) and Go graphs (runs.Graph). Start picks up the
// runs an earlier process left unfinished on the store; Close stops the
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
