package lgsaver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cairn-dev/cairn/store"
)

// lgWrites is a putWrites request.
type lgWrites struct {
	ThreadID     string `json:"thread_id"`
	NS           string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
	TaskID       string `json:"task_id"`
	TaskPath     string `json:"task_path"`
	Writes       []struct {
		Channel string          `json:"channel"`
		Idx     int             `json:"idx"`
		Value   json.RawMessage `json:"value"`
	} `json:"writes"`
}

// lgWrite is one pending write as stored (a Cairn write's update).
type lgWrite struct {
	TaskID   string          `json:"task_id"`
	Channel  string          `json:"channel"`
	Idx      int             `json:"idx"`
	TaskPath string          `json:"task_path,omitempty"`
	Value    json.RawMessage `json:"value"`
}

// putWrites stores pending writes of a checkpoint: a regular write (idx
// >= 0) already stored stays as it was, a special one (errors, interrupts:
// idx < 0) replaces it, as LangGraph's savers do.
func (s *Saver) putWrites(w http.ResponseWriter, r *http.Request) error {
	var req lgWrites
	if err := s.decode(r, &req); err != nil {
		return err
	}
	t, err := s.resolve(r.Context(), req.ThreadID, req.NS)
	if err != nil {
		return err
	}
	if req.CheckpointID == "" || req.TaskID == "" {
		return unprocessable("$.checkpoint_id", "checkpoint_id and task_id are required")
	}
	ctx := r.Context()
	if _, err := s.thread(ctx, t.id); err != nil {
		return err
	}
	cp, err := s.lgLoadMeta(ctx, t, req.CheckpointID)
	if err != nil {
		return err
	}
	have, err := s.store.Writes(ctx, t.thread, t.ns, cp)
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	for _, hw := range have {
		stored[hw.Task] = true
	}
	var ws []store.Write
	for i, wr := range req.Writes {
		if wr.Channel == "" || !json.Valid(wr.Value) {
			return unprocessable(fmt.Sprintf("$.writes[%d]", i), "a write has a channel and a JSON value")
		}
		key := fmt.Sprintf("%s|%d", req.TaskID, wr.Idx)
		if wr.Idx >= 0 && stored[key] {
			continue
		}
		b, _ := json.Marshal(lgWrite{TaskID: req.TaskID, Channel: wr.Channel, Idx: wr.Idx, TaskPath: req.TaskPath, Value: wr.Value})
		ws = append(ws, store.Write{Task: key, Node: wr.Channel, Update: b})
	}
	if len(ws) > 0 {
		if err := s.store.PutWrites(ctx, t.thread, t.ns, cp, ws); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"stored": len(ws)})
	return nil
}

// lgLoadMeta finds the seq of checkpoint id.
func (s *Saver) lgLoadMeta(ctx context.Context, t lgTarget, id string) (int64, error) {
	n := s.index.get(t.thread, t.ns)
	n.mu.Lock()
	defer n.mu.Unlock()
	seq, ok, err := n.seq(ctx, s.ext, s.store, t.thread, t.ns, id, true)
	if err == nil && !ok {
		err = notFound("thread %q namespace %q has no checkpoint %q", t.id, t.lgNS, id)
	}
	return seq, err
}
