package lgsaver

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn/store"
)

// lgExtraKey is the key of a checkpoint's LangGraph fields in Meta.Extra.
const lgExtraKey = "langgraph"

// lgThreadKey marks, in a thread's metadata, the threads the LangGraph
// checkpointer created (value "langgraph"); a list without a thread id
// looks at those.
const lgThreadKey = "cairn_checkpointer"

// lgBodyLimit is the request body limit of the saver's routes when
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

// resolve checks a request's thread id and namespace.
func (s *Saver) resolve(ctx context.Context, thread, ns string) (lgTarget, error) {
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
	return lgTarget{id: thread, thread: s.key(ctx, thread), lgNS: ns, ns: cns}, nil
}
