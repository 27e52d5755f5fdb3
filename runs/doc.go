// Package runs is Cairn's run service: it runs assistants (Go graphs,
// agent files, pipelines: Assistant) on threads of a Cairn store, with
// nothing of HTTP in it. Package server is its HTTP front end (the
// LangGraph Platform API); cairn run --queue, cairn runs --cancel/--retry
// and package worker call it directly; a Go program can too (see the
// Example).
//
// A Service creates runs (Create: the request is checked against its
// assistant before anything is stored, and agentfile.CheckStart, the one
// rule every front end asks, decides whether the run may start on its
// thread), runs them one at a time per thread as their multitask strategy
// says (reject, enqueue, interrupt, rollback), or, with Config.Queue,
// queues them for workers (Execute runs one). Each run has an event log —
// LangGraph's stream-mode events, kept in memory for live readers and in
// the store (store.RunLog) for readers that come back, so a reader resumes
// by event id with nothing repeated and nothing lost (Events). Answer
// answers a thread's pause; a pause that waits longer than its
// assistant's ApprovalTimeout is answered with its fallback. Start picks
// up the runs a previous process left unfinished; Close stops the runs in
// flight without committing their current step.
//
// Errors are *Error values whose kind (ErrInvalidInput with the place,
// ErrNotFound, ErrBusy, ErrUnfinished, ErrState, ErrClosed) a front end
// tells apart with errors.Is; nothing is stored when a request is refused.
//
// Tenants: a context carries the caller's tenant (WithTenant); the ids a
// caller names are its own, kept in the store under the tenant's key
// (store.ThreadKey), and another tenant's threads and runs are not found.
package runs
