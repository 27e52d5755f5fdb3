package lgsaver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// lgGet is a getTuple request.
type lgGet struct {
	ThreadID     string `json:"thread_id"`
	NS           string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
}

// lgTuple is a checkpoint as the saver reads it.
type lgTuple struct {
	ThreadID   string            `json:"thread_id"`
	NS         string            `json:"checkpoint_ns"`
	Seq        int64             `json:"seq"`
	Checkpoint lgHeader          `json:"checkpoint"`
	Metadata   json.RawMessage   `json:"metadata,omitempty"`
	ParentID   string            `json:"parent_id,omitempty"`
	Channels   state.Doc         `json:"channels"`
	Writes     []json.RawMessage `json:"pending_writes"`
	// Shared lists, in a batch, the list channels whose value is the
	// first Len elements of the same channel of tuple Of of the batch:
	// history shares most of its lists, so a batch sends each once.
	Shared map[string]lgShared `json:"shared,omitempty"`
}

// lgShared names a list a tuple shares with an earlier tuple of a batch.
type lgShared struct {
	Of  int `json:"of"`
	Len int `json:"len"`
}

// getCheckpoint answers a checkpoint (the head without an id) or 404.
func (s *Saver) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req lgGet
	if err := s.decode(r, &req); err != nil {
		return err
	}
	t, err := s.resolve(r.Context(), req.ThreadID, req.NS)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.thread(ctx, t.id); err != nil {
		return err
	}
	cp, err := s.lgLoad(ctx, t, req.CheckpointID)
	if err != nil {
		return err
	}
	tu, err := s.lgTupleOf(ctx, t, cp)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tu)
	return nil
}

// lgLoad loads checkpoint id of a namespace, or its head when id is empty.
func (s *Saver) lgLoad(ctx context.Context, t lgTarget, id string) (store.Checkpoint, error) {
	n := s.index.get(t.thread, t.ns)
	n.mu.Lock()
	defer n.mu.Unlock()
	missing := notFound("thread %q namespace %q has no checkpoint %q", t.id, t.lgNS, id)
	if id == "" {
		head, err := s.lgNewest(ctx, t)
		if err != nil || head.Seq == 0 {
			return store.Checkpoint{}, cmpErr(err, notFound("thread %q namespace %q has no checkpoints", t.id, t.lgNS))
		}
		rec, _ := lgRecordOf(head.Meta)
		if n.head == head.Seq && n.headID == rec.Checkpoint.ID {
			head.State, head.HasState = n.state, true
			return head, nil
		}
		return s.store.Load(ctx, store.LoadRequest{Thread: t.thread, Namespace: t.ns, Seq: head.Seq})
	}
	for try := 0; try < 2; try++ {
		seq, ok, err := n.seq(ctx, s.ext, s.store, t.thread, t.ns, id, true)
		if err != nil || !ok {
			return store.Checkpoint{}, cmpErr(err, missing)
		}
		cp, err := s.store.Load(ctx, store.LoadRequest{Thread: t.thread, Namespace: t.ns, Seq: seq})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Checkpoint{}, err
		}
		if rec, ok := lgRecordOf(cp.Meta); err == nil && ok && rec.Checkpoint.ID == id {
			return cp, nil
		}
		// Pruned, or the thread was deleted and made again elsewhere.
		n.ids, n.top, n.head = map[string]int64{}, 0, 0
	}
	return store.Checkpoint{}, missing
}

// lgNewest reads the newest checkpoint the saver wrote in a
// namespace, without its state: a branch made with Cairn's own fork is
// passed over, and a put after what is returned is then a conflict, not a
// thread started again.
func (s *Saver) lgNewest(ctx context.Context, t lgTarget) (store.Checkpoint, error) {
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: t.thread, Namespace: t.ns, PageSize: 20}) {
		if _, ok := lgRecordOf(cp.Meta); ok || err != nil {
			return cp, err
		}
	}
	return store.Checkpoint{}, nil
}

// lgTupleOf is a loaded checkpoint with its pending writes as the saver
// reads it; a checkpoint the saver did not write is not found.
func (s *Saver) lgTupleOf(ctx context.Context, t lgTarget, cp store.Checkpoint) (lgTuple, error) {
	rec, ok := lgRecordOf(cp.Meta)
	if !ok {
		return lgTuple{}, notFound("thread %q namespace %q checkpoint %d was not written by the LangGraph checkpointer", t.id, t.lgNS, cp.Seq)
	}
	ws, err := s.store.Writes(ctx, t.thread, t.ns, cp.Seq)
	if err != nil {
		return lgTuple{}, err
	}
	tu := lgTuple{ThreadID: t.id, NS: t.lgNS, Seq: cp.Seq, Checkpoint: rec.Checkpoint, Metadata: rec.Metadata, ParentID: rec.ParentID, Channels: cp.State, Writes: make([]json.RawMessage, 0, len(ws))}
	for _, w := range ws {
		tu.Writes = append(tu.Writes, w.Update)
	}
	return tu, nil
}
