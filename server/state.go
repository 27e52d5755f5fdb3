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
	v, err := s.stateOf(ctx, threadID, ns, checkpoint, subgraphs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// stateOf is a thread's state at a checkpoint of a namespace (its head:
// checkpoint "").
func (s *Server) stateOf(ctx context.Context, threadID, ns, checkpoint string, subgraphs bool) (any, error) {
	th, err := s.svc.Thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	var at runs.CheckpointAt
	if checkpoint != "" {
		if at, err = runs.ParseCheckpointID(checkpoint); err != nil {
			return nil, unprocessable("checkpoint_id", "%v", err)
		}
	}
	if th.Head == 0 && at.Seq == 0 && ns == "" {
		return emptyState(th.ID), nil
	}
	v, cp, err := s.stateView(ctx, th.ID, ns, at)
	if err != nil {
		return nil, err
	}
	v.AddRunMetadata(s.svc.RunMetadata(ctx, th, ns)(cp))
	if subgraphs {
		if err := s.addSubgraphs(ctx, &v, th.ID, ns); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// stateView is checkpoint at of a namespace as a thread state, and the
// checkpoint it was built from.
func (s *Server) stateView(ctx context.Context, thread, ns string, at runs.CheckpointAt) (runs.State, store.Checkpoint, error) {
	if at.Input {
		cp, err := s.svc.InputOf(ctx, thread, ns, at.Seq)
		if err != nil {
			return runs.State{}, cp, err
		}
		v, err := s.svc.InputView(ctx, cp)
		return v, cp, err
	}
	cp, err := s.loadState(ctx, thread, ns, at.Seq)
	if err != nil {
		return runs.State{}, cp, err
	}
	return runs.StateView(cp), cp, nil
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
		ref := runs.TaskCheckpoint{ThreadID: sub.Checkpoint.ThreadID, CheckpointNS: sub.Checkpoint.CheckpointNS, CheckpointID: sub.Checkpoint.CheckpointID}
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
	var ns string
	if req.Checkpoint != nil && req.Checkpoint.CheckpointNS != "" {
		ns = runs.CairnNamespace(req.Checkpoint.CheckpointNS)
		if err := store.ValidateNamespace(ns); err != nil {
			return unprocessable("$.checkpoint.checkpoint_ns", "%v", err)
		}
		if cid != "" {
			return unprocessable("$.checkpoint.checkpoint_id", "a subgraph's state is updated at its head: name its namespace alone")
		}
	}
	var named runs.CheckpointAt
	if cid != "" {
		var err error
		if named, err = runs.ParseCheckpointID(cid); err != nil {
			return unprocessable("$.checkpoint_id", "%v", err)
		}
	}
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	at, err := s.svc.StateAt(ctx, th.ID, "", named)
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
	if ns != "" {
		cp, err := s.svc.UpdateSubgraph(ctx, th, a, ns, upd, req.AsNode)
		if err != nil {
			return err
		}
		ref := runs.NewCheckpointRef(th.ID, ns, cp.Seq)
		writeJSON(w, http.StatusOK, map[string]any{"checkpoint": ref, "configurable": ref})
		return nil
	}
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
func (q historyRequest) beforeSeq() (runs.CheckpointAt, error) {
	b := string(q.Before)
	if b == "" || b == "null" {
		return runs.CheckpointAt{}, nil
	}
	var id string
	if json.Unmarshal(q.Before, &id) != nil {
		var cfg struct {
			Configurable runs.CheckpointConfig `json:"configurable"`
		}
		if err := json.Unmarshal(q.Before, &cfg); err != nil {
			return runs.CheckpointAt{}, unprocessable("$.before", "want a checkpoint id or {configurable: {checkpoint_id}}")
		}
		id = cfg.Configurable.CheckpointID
	}
	at, err := runs.ParseCheckpointID(id)
	if err != nil {
		return at, unprocessable("$.before", "%v", err)
	}
	return at, nil
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
	out, err := s.historyOf(r.Context(), r.PathValue("thread_id"), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, selectFields(out, q.Select))
	return nil
}

// historyOf lists a thread's checkpoints as q asks.
func (s *Server) historyOf(ctx context.Context, threadID string, q historyRequest) ([]runs.State, error) {
	limit := 10
	if q.Limit != nil {
		limit = *q.Limit
	}
	if limit < 1 || limit > 10000 {
		return nil, unprocessable("$.limit", "%d: want 1 to 10000", limit)
	}
	before, err := q.beforeSeq()
	if err != nil {
		return nil, err
	}
	ns := ""
	if q.Checkpoint != nil {
		ns = runs.CairnNamespace(q.Checkpoint.CheckpointNS)
		if err := store.ValidateNamespace(ns); err != nil {
			return nil, unprocessable("$.checkpoint.checkpoint_ns", "%v", err)
		}
	}
	th, err := s.svc.Thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	l := historyList{s: s, th: th, filter: q.Metadata, limit: limit, runMD: s.svc.RunMetadata(ctx, th, ns)}
	if err := l.list(ctx, ns, before); err != nil {
		return nil, err
	}
	return l.out, nil
}

// historyList gathers a history listing: each checkpoint as a thread
// state, a run's input checkpoint followed by its input view, those
// whose metadata matches the filter, up to limit.
type historyList struct {
	s      *Server
	th     store.Thread
	filter map[string]any
	limit  int
	runMD  func(store.Checkpoint) map[string]any
	out    []runs.State
}

// list lists the states of namespace ns before checkpoint before (all
// when zero): a stored checkpoint that is a run's input starts the list
// with its input view.
func (l *historyList) list(ctx context.Context, ns string, before runs.CheckpointAt) error {
	if before.Seq > 0 && !before.Input {
		if cp, err := l.s.svc.InputOf(ctx, l.th.ID, ns, before.Seq); err == nil {
			if full, err := l.addInput(ctx, cp); full || err != nil {
				return err
			}
		}
	}
	req := store.HistoryRequest{Thread: l.th.ID, Namespace: ns, Before: before.Seq, WithState: true}
	if len(l.filter) == 0 {
		req.Limit = l.limit
	}
	for cp, err := range l.s.store.History(ctx, req) {
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if l.add(runs.StateView(cp), cp) {
			return nil
		}
		if runs.RunInput(cp) {
			if full, err := l.addInput(ctx, cp); full || err != nil {
				return err
			}
		}
	}
	return nil
}

// add adds a state if its metadata matches, and reports whether the list
// is full.
func (l *historyList) add(v runs.State, cp store.Checkpoint) bool {
	v.AddRunMetadata(l.runMD(cp))
	if metadataMatch(v.Metadata, l.filter) {
		l.out = append(l.out, v)
	}
	return len(l.out) == l.limit
}

// addInput adds the input view before cp.
func (l *historyList) addInput(ctx context.Context, cp store.Checkpoint) (bool, error) {
	v, err := l.s.svc.InputView(ctx, cp)
	if err != nil {
		return false, err
	}
	return l.add(v, cp), nil
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
