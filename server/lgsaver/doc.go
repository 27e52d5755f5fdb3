// Package lgsaver serves the LangGraph saver protocol: the HTTP routes
// (/checkpointer/…) through which the LangGraph JS checkpointer of
// clients/langgraph-js (a BaseCheckpointSaver) keeps its checkpoints in a
// Cairn store. See docs/langgraph-saver.md.
//
// Each LangGraph checkpoint is a Cairn checkpoint whose state holds the
// channel values, stored as a patch against its parent (a list channel
// that grew stores its new elements only), with LangGraph's own fields
// (checkpoint id, parent id, channel versions, metadata) in its metadata
// under Meta.Extra["langgraph"], and its checkpoint id as the Cairn
// checkpoint's ExternalID. A LangGraph namespace
// ("outer:<task>|inner:<task>") maps reversibly to a Cairn namespace.
//
// What the package guarantees:
//
//   - A put whose parent is not its namespace's head (another writer moved
//     the thread on) is refused with ErrConflict and stores nothing,
//     unless it asks for a fork; a put of a checkpoint id the namespace
//     already has is refused with ErrConflict.
//   - A checkpoint is found by its id through the store's index of
//     external ids, in any process: what one process caches (the head
//     state it patches against) is checked against the store, never
//     trusted alone.
//   - Threads are the request's tenant's (Config.Key, Config.Tenant):
//     another tenant's thread is not found.
//
// The package does no authentication, body limits, timeouts or CORS: the
// server that mounts its Routes does, and answers an *Error with the
// status of its kind (StatusOf).
package lgsaver
