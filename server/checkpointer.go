package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/state"
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

// lgChannel is the new value of one channel in a put: its whole value,
// elements appended to the parent's list (Base: the parent's length), or
// its removal.
type lgChannel struct {
	Value  json.RawMessage   `json:"value"`
	Append []json.RawMessage `json:"append"`
	Base   *int              `json:"base"`
	Delete bool              `json:"delete"`
}

type lgPut struct {
	ThreadID string `json:"thread_id"`
	NS       string `json:"checkpoint_ns"`
	// ParentID is the checkpoint this one follows (the config's
	// checkpoint_id); empty for a first checkpoint.
	ParentID string `json:"parent_id"`
	// Fork allows a parent that is not the head (time travel): a new
	// branch. Without it such a put is a conflict: another writer moved
	// the thread on.
	Fork       bool                 `json:"fork"`
	Checkpoint lgHeader             `json:"checkpoint"`
	Metadata   json.RawMessage      `json:"metadata"`
	Channels   map[string]lgChannel `json:"channels"`
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
	return lgTarget{id: thread, thread: threadKey(ctx, thread), lgNS: ns, ns: cns}, nil
}

func (p *lgPut) check() error {
	if p.Checkpoint.ID == "" {
		return unprocessable("$.checkpoint.id", "a checkpoint id is required")
	}
	if len(p.Checkpoint.ID) > 256 {
		return unprocessable("$.checkpoint.id", "longer than 256 bytes")
	}
	if m := bytes.TrimSpace(p.Metadata); len(m) > 0 && m[0] != '{' && string(m) != "null" {
		return unprocessable("$.metadata", "want an object")
	}
	for name, c := range p.Channels {
		path := "$.channels." + name
		n := 0
		for _, set := range []bool{c.Value != nil, c.Append != nil, c.Delete} {
			if set {
				n++
			}
		}
		if name == "" || n != 1 {
			return unprocessable(path, "a channel has a name and one of value, append (with base) or delete")
		}
		if c.Append != nil && (c.Base == nil || *c.Base < 0) {
			return unprocessable(path+".base", "append needs the parent's list length")
		}
	}
	return nil
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

// putCheckpoint stores a LangGraph checkpoint.
func (s *Server) putCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req lgPut
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	t, err := lgResolve(r.Context(), req.ThreadID, req.NS)
	if err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	ctx := r.Context()
	exists, err := s.lgThreadExists(ctx, t.thread)
	if err != nil {
		return err
	}
	n := s.lg.get(t.thread, t.ns)
	n.mu.Lock()
	defer n.mu.Unlock()
	cp, err := s.lgCommit(ctx, n, t, &req, exists)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread_id": t.id, "checkpoint_ns": t.lgNS, "checkpoint_id": req.Checkpoint.ID, "seq": cp.Seq})
	return nil
}

// lgThreadExists reports whether the request's tenant has the thread;
// another tenant's is not found.
func (s *Server) lgThreadExists(ctx context.Context, id string) (bool, error) {
	th, err := s.store.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if th.Tenant != tenantOf(ctx) {
		return false, notFound("thread %q not found", apiThreadID(id))
	}
	return true, nil
}

// lgCreateThread creates the thread of a first checkpoint for the
// request's tenant, marked as the checkpointer's.
func (s *Server) lgCreateThread(ctx context.Context, id string) error {
	md := map[string]any{lgThreadKey: "langgraph"}
	_, err := s.store.CreateThread(ctx, store.Thread{ID: id, Tenant: tenantOf(ctx), Metadata: md})
	if errors.Is(err, store.ErrConflict) { // made meanwhile: the append decides
		_, err = s.lgThreadExists(ctx, id)
	}
	return err
}

// lgHead reads the head of a namespace without its state (0: empty).
func (s *Server) lgHead(ctx context.Context, thread, ns string) (store.Checkpoint, error) {
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns, Limit: 1}) {
		return cp, err
	}
	return store.Checkpoint{}, nil
}

// lgPlan is what a put will commit: the checkpoint the patch applies to
// (at), the head, the patch and the new state.
type lgPlan struct {
	at    int64
	head  store.Checkpoint
	patch state.Patch
	state state.Doc
}

// lgPlanPut checks a put against the stored namespace and computes its
// patch; nothing is written. n.mu is held.
func (s *Server) lgPlanPut(ctx context.Context, n *lgNS, t lgTarget, req *lgPut, exists bool) (lgPlan, error) {
	var pl lgPlan
	if exists {
		var err error
		if pl.head, err = s.lgHead(ctx, t.thread, t.ns); err != nil {
			return pl, err
		}
		if _, dup, err := n.seq(ctx, s.store, t.thread, t.ns, req.Checkpoint.ID); err != nil || dup {
			return pl, cmpErr(err, conflict("checkpoint %q is already stored in thread %q namespace %q", req.Checkpoint.ID, t.id, t.lgNS))
		}
	}
	pl.at = pl.head.Seq
	if req.ParentID != "" {
		pseq, ok := int64(0), false
		if exists {
			var err error
			if pseq, ok, err = n.seq(ctx, s.store, t.thread, t.ns, req.ParentID); err != nil {
				return pl, err
			}
		}
		if !ok {
			return pl, notFound("parent checkpoint %q not found in thread %q namespace %q", req.ParentID, t.id, t.lgNS)
		}
		if pseq != pl.head.Seq && !req.Fork {
			hr, _ := lgRecordOf(pl.head.Meta)
			return pl, conflict("thread %q namespace %q moved on: its head is checkpoint %q, not the parent %q (another writer put a checkpoint since this one was read)", t.id, t.lgNS, hr.Checkpoint.ID, req.ParentID)
		}
		pl.at = pseq
	}
	base, err := s.lgState(ctx, n, t, pl.at)
	if err != nil {
		return pl, err
	}
	var versions map[string]json.RawMessage
	if err := json.Unmarshal(req.Checkpoint.Versions, &versions); len(req.Checkpoint.Versions) > 0 && err != nil {
		return pl, unprocessable("$.checkpoint.channel_versions", "want an object: %v", err)
	}
	keep := func(f string) bool { _, ok := versions[f]; return ok && req.ParentID != "" }
	if pl.patch, err = lgPatch(base, req.Channels, keep); err != nil {
		return pl, err
	}
	if pl.state, err = base.Apply(pl.patch); err != nil {
		return pl, unprocessable("$.channels", "%v", err)
	}
	return pl, nil
}

// lgCommit appends the checkpoint after its parent, or forks from it;
// the thread is created with its first checkpoint. n.mu is held.
func (s *Server) lgCommit(ctx context.Context, n *lgNS, t lgTarget, req *lgPut, exists bool) (store.Checkpoint, error) {
	pl, err := s.lgPlanPut(ctx, n, t, req, exists)
	if err != nil {
		return store.Checkpoint{}, err
	}
	if !exists {
		if err := s.lgCreateThread(ctx, t.thread); err != nil {
			return store.Checkpoint{}, err
		}
	}
	meta := store.Meta{Source: lgSource(req.Metadata), Extra: map[string]any{lgExtraKey: lgRecord{Checkpoint: req.Checkpoint, ParentID: req.ParentID, Metadata: req.Metadata}}}
	var cp store.Checkpoint
	if pl.at == pl.head.Seq {
		nodes := lgNodes(pl.head.Meta, req.Checkpoint.Seen)
		cp, err = s.store.Append(ctx, store.Checkpoint{Thread: t.thread, Namespace: t.ns, Parent: pl.head.Seq, Nodes: nodes, Patch: pl.patch, State: pl.state, Meta: meta})
	} else {
		cp, err = s.store.Fork(ctx, store.ForkRequest{Thread: t.thread, Namespace: t.ns, At: pl.at, Patch: pl.patch, Meta: meta})
	}
	if errors.Is(err, store.ErrConflict) {
		return store.Checkpoint{}, conflict("thread %q namespace %q moved on while checkpoint %q was stored (another writer): %v", t.id, t.lgNS, req.Checkpoint.ID, err)
	}
	if err != nil {
		return store.Checkpoint{}, err
	}
	n.add(cp.Seq, req.Checkpoint.ID, pl.state)
	return cp, nil
}

// lgNodes names the nodes that ran in the step a checkpoint ends, for
// Cairn's history and UI: those whose versions_seen changed since the
// parent (LangGraph's own bookkeeping entries left out).
func lgNodes(parent store.Meta, seen json.RawMessage) []string {
	var now, before map[string]json.RawMessage
	if json.Unmarshal(seen, &now) != nil {
		return nil
	}
	if rec, ok := lgRecordOf(parent); ok {
		_ = json.Unmarshal(rec.Checkpoint.Seen, &before) // nil: every node is new
	}
	var nodes []string
	for k, v := range now {
		if strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__") {
			continue
		}
		if old, ok := before[k]; !ok || !bytes.Equal(compactJSON(old), compactJSON(v)) {
			nodes = append(nodes, k)
		}
	}
	slices.Sort(nodes)
	return nodes
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// lgState is the state of checkpoint seq (0: the empty state), from the
// index when it is the head it keeps.
func (s *Server) lgState(ctx context.Context, n *lgNS, t lgTarget, seq int64) (state.Doc, error) {
	if seq == 0 {
		return state.EmptyDoc(), nil
	}
	if n.head == seq {
		return n.state, nil
	}
	cp, err := s.store.Load(ctx, store.LoadRequest{Thread: t.thread, Namespace: t.ns, Seq: seq})
	if err != nil {
		return state.Doc{}, err
	}
	return cp.State, nil
}

// lgSource is the Cairn source of a LangGraph checkpoint's metadata
// source: LangGraph's "loop" is an ordinary step.
func lgSource(md json.RawMessage) string {
	var m struct {
		Source string `json:"source"`
	}
	_ = json.Unmarshal(md, &m) // checked to be an object or null
	switch m.Source {
	case "input", "update", "fork":
		return m.Source
	}
	return ""
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// lgPatch is the patch that sets the channels on base: an appended list
// becomes "add /ch/-" operations, an unchanged value nothing. The fields
// of base that chans does not name stay when keep says so and are removed
// otherwise: a checkpoint has the channels of its channel_versions, as
// LangGraph's savers read them.
func lgPatch(base state.Doc, chans map[string]lgChannel, keep func(string) bool) (state.Patch, error) {
	var p state.Patch
	names := make([]string, 0, len(chans))
	for k := range chans {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		ops, err := lgChannelOps(base, name, chans[name])
		if err != nil {
			return nil, err
		}
		p = append(p, ops...)
	}
	for _, f := range base.Fields() {
		if _, ok := chans[f]; !ok && !keep(f) {
			p = append(p, state.Op{Op: state.OpRemove, Path: "/" + pointerEscaper.Replace(f)})
		}
	}
	return p, nil
}

func lgChannelOps(base state.Doc, name string, c lgChannel) (state.Patch, error) {
	path := "/" + pointerEscaper.Replace(name)
	switch {
	case c.Delete:
		if base.Has(name) {
			return state.Patch{{Op: state.OpRemove, Path: path}}, nil
		}
		return nil, nil
	case c.Append != nil:
		have, _ := base.ListLen(name)
		if _, isList := base.ListLen(name); (base.Has(name) && !isList) || have != *c.Base {
			return nil, unprocessable("$.channels."+name+".base", "the parent's list has %d elements, not %d", have, *c.Base)
		}
		if !base.Has(name) {
			all, _ := json.Marshal(c.Append)
			return state.Patch{{Op: state.OpAdd, Path: path, Value: all}}, nil
		}
		return appendOps(path, c.Append), nil
	}
	var v bytes.Buffer
	if err := json.Compact(&v, c.Value); err != nil {
		return nil, unprocessable("$.channels."+name+".value", "%v", err)
	}
	old, ok := base.Raw(name)
	if !ok {
		return state.Patch{{Op: state.OpAdd, Path: path, Value: v.Bytes()}}, nil
	}
	if bytes.Equal(old, v.Bytes()) {
		return nil, nil
	}
	if added, ok := appended(base, name, v.Bytes()); ok {
		return appendOps(path, added), nil
	}
	return state.Patch{{Op: state.OpReplace, Path: path, Value: v.Bytes()}}, nil
}

// appended returns the elements v adds to base's list field name, when v
// is that list with elements added at its end.
func appended(base state.Doc, name string, v []byte) ([]json.RawMessage, bool) {
	n, isList := base.ListLen(name)
	if !isList || len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil || len(elems) < n {
		return nil, false
	}
	for i := range n {
		old, _ := base.Element(name, i)
		if !bytes.Equal(old, elems[i]) {
			return nil, false
		}
	}
	return elems[n:], true
}

func appendOps(path string, elems []json.RawMessage) state.Patch {
	p := make(state.Patch, 0, len(elems))
	for _, e := range elems {
		p = append(p, state.Op{Op: state.OpAdd, Path: path + "/-", Value: e})
	}
	return p
}

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
func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req lgGet
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	t, err := lgResolve(r.Context(), req.ThreadID, req.NS)
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
func (s *Server) lgLoad(ctx context.Context, t lgTarget, id string) (store.Checkpoint, error) {
	n := s.lg.get(t.thread, t.ns)
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
		seq, ok, err := n.seq(ctx, s.store, t.thread, t.ns, id)
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

// lgNewest reads the newest checkpoint the checkpointer wrote in a
// namespace, without its state: a branch made with Cairn's own fork is
// passed over, and a put after what is returned is then a conflict, not a
// thread started again.
func (s *Server) lgNewest(ctx context.Context, t lgTarget) (store.Checkpoint, error) {
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: t.thread, Namespace: t.ns, PageSize: 20}) {
		if _, ok := lgRecordOf(cp.Meta); ok || err != nil {
			return cp, err
		}
	}
	return store.Checkpoint{}, nil
}

// cmpErr is err when not nil, else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// lgTupleOf is a loaded checkpoint with its pending writes as the saver
// reads it; a checkpoint the checkpointer did not write is not found.
func (s *Server) lgTupleOf(ctx context.Context, t lgTarget, cp store.Checkpoint) (lgTuple, error) {
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
func (s *Server) putWrites(w http.ResponseWriter, r *http.Request) error {
	var req lgWrites
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	t, err := lgResolve(r.Context(), req.ThreadID, req.NS)
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
func (s *Server) lgLoadMeta(ctx context.Context, t lgTarget, id string) (int64, error) {
	n := s.lg.get(t.thread, t.ns)
	n.mu.Lock()
	defer n.mu.Unlock()
	seq, ok, err := n.seq(ctx, s.store, t.thread, t.ns, id)
	if err == nil && !ok {
		err = notFound("thread %q namespace %q has no checkpoint %q", t.id, t.lgNS, id)
	}
	return seq, err
}
