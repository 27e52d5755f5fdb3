package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

func (s *Server) loadState(ctx context.Context, thread, ns string, seq int64) (store.Checkpoint, error) {
	cp, err := s.store.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns, Seq: seq})
	if errors.Is(err, store.ErrNotFound) {
		return cp, notFound("thread %q has no checkpoint %s", thread, checkpointName(ns, seq))
	}
	return cp, err
}

func checkpointName(ns string, seq int64) string {
	name := "head"
	if seq > 0 {
		name = runs.CheckpointID(seq)
	}
	if ns != "" {
		name += " in namespace " + ns
	}
	return name
}

// emptyState is the state of a thread with no checkpoint.
func emptyState(thread string) runs.State {
	return runs.State{Values: json.RawMessage("{}"), Next: []string{}, Tasks: []runs.Task{}, Checkpoint: runs.NewCheckpointRef(thread, "", 0),
		Metadata: map[string]any{}, Interrupts: []runs.Interrupt{}}
}

// threadState answers a state read: the head or a checkpoint of a
// namespace, with the heads of the thread's other namespaces as tasks
// when subgraphs are asked for.
func (s *Server) threadState(ctx context.Context, w http.ResponseWriter, threadID, ns, checkpoint string, subgraphs bool) error {
	th, err := s.svc.Thread(ctx, threadID)
	if err != nil {
		return err
	}
	var seq int64
	if checkpoint != "" {
		if seq, err = runs.ParseCheckpointID(checkpoint); err != nil {
			return unprocessable("checkpoint_id", "%v", err)
		}
	}
	if th.Head == 0 && seq == 0 && ns == "" {
		writeJSON(w, http.StatusOK, emptyState(th.ID))
		return nil
	}
	cp, err := s.loadState(ctx, th.ID, ns, seq)
	if err != nil {
		return err
	}
	v := runs.StateView(cp)
	v.AddRunMetadata(s.svc.RunMetadata(ctx, th, ns)(cp))
	if subgraphs {
		if err := s.addSubgraphs(ctx, &v, th.ID, ns); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// addSubgraphs adds the head state of every namespace below ns as a task.
func (s *Server) addSubgraphs(ctx context.Context, v *runs.State, thread, ns string) error {
	list, err := s.store.Namespaces(ctx, thread)
	if err != nil {
		return err
	}
	for _, n := range list {
		if n.Name == ns || (ns != "" && !isBelow(n.Name, ns)) {
			continue
		}
		cp, err := s.loadState(ctx, thread, n.Name, 0)
		if err != nil {
			return err
		}
		sub := runs.StateView(cp)
		ref := sub.Checkpoint
		v.Tasks = append(v.Tasks, runs.Task{ID: runs.InterruptID(thread, n.Name, 0), Name: runs.APINamespace(n.Name), Interrupts: sub.Interrupts, Checkpoint: &ref, State: &sub})
	}
	return nil
}

func isBelow(name, ns string) bool { return len(name) > len(ns) && name[:len(ns)+1] == ns+"/" }

func (s *Server) getState(w http.ResponseWriter, r *http.Request) error {
	subgraphs, err := queryBool(r.URL.Query(), "subgraphs")
	if err != nil {
		return err
	}
	return s.threadState(r.Context(), w, r.PathValue("thread_id"), "", r.PathValue("checkpoint_id"), subgraphs)
}

type stateAtRequest struct {
	Checkpoint runs.CheckpointConfig `json:"checkpoint"`
	Subgraphs  bool                  `json:"subgraphs"`
	Select     []string              `json:"select"`
}

func (s *Server) postStateCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req stateAtRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	return s.threadState(r.Context(), w, r.PathValue("thread_id"), runs.CairnNamespace(req.Checkpoint.CheckpointNS), req.Checkpoint.CheckpointID, req.Subgraphs)
}

type stateUpdate struct {
	Values       json.RawMessage        `json:"values"`
	AsNode       string                 `json:"as_node"`
	Checkpoint   *runs.CheckpointConfig `json:"checkpoint"`
	CheckpointID string                 `json:"checkpoint_id"`
}

// updateState writes values into the thread's state as a node would
// (POST /threads/{id}/state): at the head, or, from a checkpoint, as a new
// branch whose head the next run continues.
func (s *Server) updateState(w http.ResponseWriter, r *http.Request) error {
	var req stateUpdate
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	var upd state.Update
	if v := string(req.Values); v != "" && v != "null" {
		if err := json.Unmarshal(req.Values, &upd); err != nil {
			return unprocessable("$.values", "want an object of state fields")
		}
	}
	cid := req.CheckpointID
	if req.Checkpoint != nil && req.Checkpoint.CheckpointID != "" {
		cid = req.Checkpoint.CheckpointID
	}
	if req.Checkpoint != nil && req.Checkpoint.CheckpointNS != "" {
		return unprocessable("$.checkpoint.checkpoint_ns", "%q: Cairn updates a thread's root state only; a subgraph's state is its own run's (resume the thread to go on in it)", req.Checkpoint.CheckpointNS)
	}
	var at int64
	if cid != "" {
		var err error
		if at, err = runs.ParseCheckpointID(cid); err != nil {
			return unprocessable("$.checkpoint_id", "%v", err)
		}
	}
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	if s.svc.Busy(ctx, th.ID) {
		return conflict("thread %q has a run in progress", runs.APIThreadID(th.ID))
	}
	a, err := s.svc.ThreadAssistant(ctx, th)
	if err != nil {
		return err
	}
	ctx = s.svc.UpdateContext(ctx, th)
	asNode, err := s.svc.DefaultNode(ctx, th, at, req.AsNode, a)
	if err != nil {
		return err
	}
	cp, err := a.UpdateState(ctx, s.store, th.ID, at, upd, asNode)
	if err != nil {
		return err
	}
	ref := runs.NewCheckpointRef(th.ID, "", cp.Seq)
	writeJSON(w, http.StatusOK, map[string]any{"checkpoint": ref, "configurable": ref})
	return nil
}

type historyRequest struct {
	Limit      *int                   `json:"limit"`
	Before     json.RawMessage        `json:"before"`
	Metadata   map[string]any         `json:"metadata"`
	Checkpoint *runs.CheckpointConfig `json:"checkpoint"`
	Select     []string               `json:"select"`
}

// beforeSeq reads before: a checkpoint id, or a config naming one.
func (q historyRequest) beforeSeq() (int64, error) {
	b := string(q.Before)
	if b == "" || b == "null" {
		return 0, nil
	}
	var id string
	if json.Unmarshal(q.Before, &id) != nil {
		var cfg struct {
			Configurable runs.CheckpointConfig `json:"configurable"`
		}
		if err := json.Unmarshal(q.Before, &cfg); err != nil {
			return 0, unprocessable("$.before", "want a checkpoint id or {configurable: {checkpoint_id}}")
		}
		id = cfg.Configurable.CheckpointID
	}
	seq, err := runs.ParseCheckpointID(id)
	if err != nil {
		return 0, unprocessable("$.before", "%v", err)
	}
	return seq, nil
}

func (s *Server) postHistory(w http.ResponseWriter, r *http.Request) error {
	var q historyRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	return s.history(w, r, q)
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) error {
	var q historyRequest
	qs := r.URL.Query()
	if l := qs.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return unprocessable("limit", "%q is not a number", l)
		}
		q.Limit = &n
	}
	if b := qs.Get("before"); b != "" {
		q.Before, _ = json.Marshal(b) // a string always marshals
	}
	return s.history(w, r, q)
}

// history lists a namespace's checkpoints newest first, each as a thread
// state, filtered by metadata.
func (s *Server) history(w http.ResponseWriter, r *http.Request, q historyRequest) error {
	limit := 10
	if q.Limit != nil {
		limit = *q.Limit
	}
	if limit < 1 || limit > 10000 {
		return unprocessable("$.limit", "%d: want 1 to 10000", limit)
	}
	before, err := q.beforeSeq()
	if err != nil {
		return err
	}
	ns := ""
	if q.Checkpoint != nil {
		ns = runs.CairnNamespace(q.Checkpoint.CheckpointNS)
		if err := store.ValidateNamespace(ns); err != nil {
			return unprocessable("$.checkpoint.checkpoint_ns", "%v", err)
		}
	}
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	out := []runs.State{}
	req := store.HistoryRequest{Thread: th.ID, Namespace: ns, Before: before, WithState: true}
	if len(q.Metadata) == 0 {
		req.Limit = limit
	}
	runMD := s.svc.RunMetadata(ctx, th, ns)
	for cp, err := range s.store.History(ctx, req) {
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		v := runs.StateView(cp)
		v.AddRunMetadata(runMD(cp))
		if !metadataMatch(v.Metadata, q.Metadata) {
			continue
		}
		if out = append(out, v); len(out) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, selectFields(out, q.Select))
	return nil
}

// metadataMatch: every key of the filter equals the metadata's (compared
// as JSON values).
func metadataMatch(md, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	b, _ := json.Marshal(md) // API metadata always marshals
	var norm map[string]any
	_ = json.Unmarshal(b, &norm)
	for k, v := range filter {
		if !reflect.DeepEqual(norm[k], v) {
			return false
		}
	}
	return true
}
