package lgsaver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

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

// putCheckpoint stores a LangGraph checkpoint.
func (s *Saver) putCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req lgPut
	if err := s.decode(r, &req); err != nil {
		return err
	}
	t, err := s.resolve(r.Context(), req.ThreadID, req.NS)
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
	n := s.index.get(t.thread, t.ns)
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
func (s *Saver) lgThreadExists(ctx context.Context, id string) (bool, error) {
	th, err := s.store.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if th.Tenant != s.tenant(ctx) {
		return false, notFound("thread %q not found", s.id(id))
	}
	return true, nil
}

// lgCreateThread creates the thread of a first checkpoint for the
// request's tenant, marked as the saver's.
func (s *Saver) lgCreateThread(ctx context.Context, id string) error {
	md := map[string]any{lgThreadKey: "langgraph"}
	_, err := s.store.CreateThread(ctx, store.Thread{ID: id, Tenant: s.tenant(ctx), Metadata: md})
	if errors.Is(err, store.ErrConflict) { // made meanwhile: the append decides
		_, err = s.lgThreadExists(ctx, id)
	}
	return err
}

// lgHead reads the head of a namespace without its state (0: empty).
func (s *Saver) lgHead(ctx context.Context, thread, ns string) (store.Checkpoint, error) {
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
func (s *Saver) lgPlanPut(ctx context.Context, n *lgNS, t lgTarget, req *lgPut, exists bool) (lgPlan, error) {
	var pl lgPlan
	if exists {
		var err error
		if pl.head, err = s.lgHead(ctx, t.thread, t.ns); err != nil {
			return pl, err
		}
		if _, dup, err := n.seq(ctx, s.ext, s.store, t.thread, t.ns, req.Checkpoint.ID, false); err != nil || dup {
			return pl, cmpErr(err, conflict("checkpoint %q is already stored in thread %q namespace %q", req.Checkpoint.ID, t.id, t.lgNS))
		}
	}
	pl.at = pl.head.Seq
	hr, _ := lgRecordOf(pl.head.Meta)
	atID := hr.Checkpoint.ID
	if req.ParentID != "" {
		pseq, ok := int64(0), false
		if exists {
			var err error
			if pseq, ok, err = n.seq(ctx, s.ext, s.store, t.thread, t.ns, req.ParentID, true); err != nil {
				return pl, err
			}
		}
		if !ok {
			return pl, notFound("parent checkpoint %q not found in thread %q namespace %q", req.ParentID, t.id, t.lgNS)
		}
		if pseq != pl.head.Seq && !req.Fork {
			return pl, conflict("thread %q namespace %q moved on: its head is checkpoint %q, not the parent %q (another writer put a checkpoint since this one was read)", t.id, t.lgNS, hr.Checkpoint.ID, req.ParentID)
		}
		pl.at, atID = pseq, req.ParentID
	}
	base, err := s.lgState(ctx, n, t, pl.at, atID)
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
func (s *Saver) lgCommit(ctx context.Context, n *lgNS, t lgTarget, req *lgPut, exists bool) (store.Checkpoint, error) {
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
		cp, err = s.store.Append(ctx, store.Checkpoint{Thread: t.thread, Namespace: t.ns, Parent: pl.head.Seq, Nodes: nodes, Patch: pl.patch, State: pl.state, Meta: meta, ExternalID: req.Checkpoint.ID})
	} else {
		cp, err = s.store.Fork(ctx, store.ForkRequest{Thread: t.thread, Namespace: t.ns, At: pl.at, Patch: pl.patch, Meta: meta, ExternalID: req.Checkpoint.ID})
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

// lgState is the state of checkpoint seq, LangGraph's id (0: the empty
// state), from the index when it is the head it keeps: the same seq and
// id (a thread deleted and made again elsewhere reuses seqs, not ids).
func (s *Saver) lgState(ctx context.Context, n *lgNS, t lgTarget, seq int64, id string) (state.Doc, error) {
	if seq == 0 {
		return state.EmptyDoc(), nil
	}
	if n.head == seq && n.headID == id {
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
