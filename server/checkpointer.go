package server

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// The checkpointer API stores LangGraph checkpoints in Cairn's store for
// the LangGraph JS checkpointer (clients/langgraph-js): each checkpoint is
// a Cairn checkpoint whose state holds the channel values, stored as a
// patch against its parent, with LangGraph's own fields (checkpoint id,
// parent id, channel versions, metadata) in its metadata under
// lgExtraKey. See docs/langgraph-saver.md.

// lgExtraKey is the key of a checkpoint's LangGraph fields in Meta.Extra.
const lgExtraKey = "langgraph"

// lgThreadKey marks, in a thread's metadata, the threads the LangGraph
// checkpointer created (value "langgraph"); a list without a thread id
// looks at those.
const lgThreadKey = "cairn_checkpointer"

// lgBodyLimit is the request body limit of the checkpointer routes when
// the server's is lower: a checkpoint whose list channel changed other
// than by appending carries the whole list.
const lgBodyLimit = 64 << 20

// lgHeader is a LangGraph checkpoint without its channel values.
type lgHeader struct {
	V        int             `json:"v"`
	ID       string          `json:"id"`
	TS       string          `json:"ts"`
	Versions json.RawMessage `json:"channel_versions"`
	Seen     json.RawMessage `json:"versions_seen"`
}

// lgRecord is what a Cairn checkpoint keeps of a LangGraph checkpoint
// besides its state.
type lgRecord struct {
	Checkpoint lgHeader        `json:"checkpoint"`
	ParentID   string          `json:"parent_id,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

func lgRecordOf(m store.Meta) (lgRecord, bool) {
	v, ok := m.Extra[lgExtraKey]
	if !ok {
		return lgRecord{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return lgRecord{}, false
	}
	var rec lgRecord
	if json.Unmarshal(b, &rec) != nil || rec.Checkpoint.ID == "" {
		return lgRecord{}, false
	}
	return rec, true
}

// lgTarget is a thread namespace a request names, resolved.
type lgTarget struct {
	id, thread, lgNS, ns string // id as the API names it, thread as the store keys it
}

// lgResolve checks a request's thread id and namespace.
func lgResolve(ctx context.Context, thread, ns string) (lgTarget, error) {
	if thread == "" {
		return lgTarget{}, unprocessable("$.thread_id", "a thread_id is required")
	}
	if err := store.ValidateID(thread); err != nil {
		return lgTarget{}, unprocessable("$.thread_id", "%v", err)
	}
	cns, err := lgNamespace(ns)
	if err != nil {
		return lgTarget{}, unprocessable("$.checkpoint_ns", "%v", err)
	}
	return lgTarget{id: thread, thread: runs.ThreadKey(ctx, thread), lgNS: ns, ns: cns}, nil
}

// checkpointerRoutes are the routes of the LangGraph checkpointer.
func (s *Server) checkpointerRoutes() []route {
	return []route{
		{method: "POST", path: "/checkpointer/put", summary: "Store a LangGraph checkpoint (Cairn checkpointer)", bodyLimit: lgBodyLimit, handler: s.putCheckpoint},
		{method: "POST", path: "/checkpointer/writes", summary: "Store a LangGraph checkpoint's pending writes (Cairn checkpointer)", bodyLimit: lgBodyLimit, handler: s.putWrites},
		{method: "POST", path: "/checkpointer/get", summary: "A LangGraph checkpoint, or a namespace's newest (Cairn checkpointer)", handler: s.getCheckpoint},
		{method: "POST", path: "/checkpointer/list", summary: "List LangGraph checkpoints (filter, before, limit) (Cairn checkpointer)", handler: s.listCheckpoints},
		{method: "POST", path: "/checkpointer/batch", summary: "Listed LangGraph checkpoints with their state (Cairn checkpointer)", handler: s.batchCheckpoints},
		{method: "DELETE", path: "/checkpointer/threads/{thread_id}", summary: "Delete a thread's checkpoints (Cairn checkpointer)", handler: s.deleteCheckpoints},
		{method: "POST", path: "/checkpointer/threads/{thread_id}/copy", summary: "Copy a thread's checkpoints to a new thread id (Cairn checkpointer)", handler: s.copyCheckpoints},
		{method: "POST", path: "/checkpointer/prune", summary: "Keep the newest checkpoints of threads, or delete them (Cairn checkpointer)", handler: s.pruneCheckpoints},
	}
}

// cmpErr is err when not nil, else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
