package lgsaver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// lgList is a list request: the checkpoints of a thread namespace, of
// every namespace of a thread (NS nil), or of every thread of the tenant
// the saver wrote (ThreadID empty), newest first.
type lgList struct {
	ThreadID     string         `json:"thread_id"`
	NS           *string        `json:"checkpoint_ns"`
	CheckpointID string         `json:"checkpoint_id"`
	Before       string         `json:"before"`
	Limit        int            `json:"limit"`
	Filter       map[string]any `json:"filter"`
}

// lgRef names a listed checkpoint.
type lgRef struct {
	ThreadID     string `json:"thread_id"`
	NS           string `json:"checkpoint_ns"`
	Seq          int64  `json:"seq"`
	CheckpointID string `json:"checkpoint_id"`
}

// listCheckpoints answers the references of the checkpoints a list
// selects, in order; the saver reads them with batchCheckpoints.
func (s *Saver) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	var req lgList
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if req.Limit < 0 {
		return unprocessable("$.limit", "must not be negative")
	}
	ctx := r.Context()
	sources, err := s.lgSources(ctx, &req)
	if err != nil {
		return err
	}
	refs := []lgRef{}
	for _, src := range sources {
		got, err := s.lgListSource(ctx, src, &req)
		if err != nil {
			return err
		}
		refs = append(refs, got...)
	}
	if len(sources) > 1 {
		slices.SortStableFunc(refs, func(a, b lgRef) int { return strings.Compare(b.CheckpointID, a.CheckpointID) })
		if req.Limit > 0 && len(refs) > req.Limit {
			refs = refs[:req.Limit]
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"refs": refs})
	return nil
}

// lgSources lists the thread namespaces a list reads.
func (s *Saver) lgSources(ctx context.Context, req *lgList) ([]lgTarget, error) {
	var threads []string
	if req.ThreadID != "" {
		t, err := s.resolve(ctx, req.ThreadID, "")
		if err != nil {
			return nil, err
		}
		if _, err := s.thread(ctx, t.id); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, nil
			}
			return nil, err
		}
		threads = []string{t.id}
	} else {
		f := store.ThreadFilter{Tenant: s.tenant(ctx), Metadata: map[string]any{lgThreadKey: "langgraph"}}
		for th, err := range s.store.Threads(ctx, f) {
			if err != nil {
				return nil, err
			}
			threads = append(threads, s.id(th.ID))
		}
	}
	var out []lgTarget
	for _, th := range threads {
		if req.NS != nil {
			t, err := s.resolve(ctx, th, *req.NS)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			continue
		}
		nss, err := s.store.Namespaces(ctx, s.key(ctx, th))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, ni := range nss {
			if lns, err := lgNamespaceOf(ni.Name); err == nil {
				out = append(out, lgTarget{id: th, thread: s.key(ctx, th), lgNS: lns, ns: ni.Name})
			}
		}
	}
	return out, nil
}

// lgListSource walks one thread namespace newest first.
func (s *Saver) lgListSource(ctx context.Context, t lgTarget, req *lgList) ([]lgRef, error) {
	hr := store.HistoryRequest{Thread: t.thread, Namespace: t.ns, PageSize: 500}
	if req.Before != "" {
		n := s.index.get(t.thread, t.ns)
		n.mu.Lock()
		if seq, ok, err := n.seq(ctx, s.ext, s.store, t.thread, t.ns, req.Before, false); err == nil && ok {
			hr.Before = seq // a start; ids are still compared below
		}
		n.mu.Unlock()
	}
	var out []lgRef
	for cp, err := range s.store.History(ctx, hr) {
		if err != nil {
			return nil, err
		}
		rec, ok := lgRecordOf(cp.Meta)
		if !ok || (req.CheckpointID != "" && rec.Checkpoint.ID != req.CheckpointID) ||
			(req.Before != "" && rec.Checkpoint.ID >= req.Before) || !lgMatch(rec.Metadata, req.Filter) {
			continue
		}
		out = append(out, lgRef{ThreadID: t.id, NS: t.lgNS, Seq: cp.Seq, CheckpointID: rec.Checkpoint.ID})
		if req.Limit > 0 && len(out) >= req.Limit {
			break
		}
	}
	return out, nil
}

// lgMatch reports whether metadata has each key of filter with an equal
// JSON value.
func lgMatch(md json.RawMessage, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	var m map[string]any
	if json.Unmarshal(md, &m) != nil {
		return false
	}
	for k, v := range filter {
		got, ok := m[k]
		if !ok || !reflect.DeepEqual(got, v) {
			return false
		}
	}
	return true
}

// lgBatch asks for listed checkpoints with their state.
type lgBatch struct {
	Refs []lgRef `json:"refs"`
}

// lgBatchMax bounds the checkpoints of one batch.
const lgBatchMax = 100

// batchCheckpoints answers listed checkpoints with their state and
// pending writes; runs of one namespace are read in one walk.
func (s *Saver) batchCheckpoints(w http.ResponseWriter, r *http.Request) error {
	var req lgBatch
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if len(req.Refs) > lgBatchMax {
		return unprocessable("$.refs", "at most %d checkpoints a batch, not %d", lgBatchMax, len(req.Refs))
	}
	ctx := r.Context()
	out := make([]lgTuple, 0, len(req.Refs))
	for i := 0; i < len(req.Refs); {
		j := i + 1
		for j < len(req.Refs) && req.Refs[j].ThreadID == req.Refs[i].ThreadID && req.Refs[j].NS == req.Refs[i].NS && req.Refs[j].Seq < req.Refs[j-1].Seq {
			j++
		}
		got, err := s.lgRun(ctx, req.Refs[i:j])
		if err != nil {
			return err
		}
		out = append(out, got...)
		i = j
	}
	lgShare(out)
	writeJSON(w, http.StatusOK, map[string]any{"tuples": out})
	return nil
}

// lgShare finds, for each tuple of a batch, the list channels that are a
// beginning of the same list in the tuple before it (the same namespace,
// newer: history grows lists), and sends them as references to the tuple
// holding the elements.
func lgShare(out []lgTuple) {
	root := make([]map[string]int, len(out)) // channel -> the tuple holding its elements
	for i := 1; i < len(out); i++ {
		prev, cur := &out[i-1], &out[i]
		if prev.ThreadID != cur.ThreadID || prev.NS != cur.NS {
			continue
		}
		for _, name := range cur.Channels.Fields() {
			n, isList := cur.Channels.ListLen(name)
			pn, pList := prev.Channels.ListLen(name)
			if !isList || !pList || n == 0 || n > pn || !samePrefix(cur.Channels, prev.Channels, name, n) {
				continue
			}
			of := i - 1
			if r, ok := root[i-1][name]; ok {
				of = r
			}
			if root[i] == nil {
				root[i] = map[string]int{}
				cur.Shared = map[string]lgShared{}
			}
			root[i][name] = of
			cur.Shared[name] = lgShared{Of: of, Len: n}
		}
	}
	for i := range out {
		if len(out[i].Shared) == 0 {
			continue
		}
		p := make(state.Patch, 0, len(out[i].Shared))
		for _, name := range slices.Sorted(maps.Keys(out[i].Shared)) {
			p = append(p, state.Op{Op: state.OpRemove, Path: "/" + pointerEscaper.Replace(name)})
		}
		if d, err := out[i].Channels.Apply(p); err == nil {
			out[i].Channels = d
		} else {
			out[i].Shared = nil // cannot happen: the fields exist
		}
	}
}

// samePrefix reports whether list field name of a is the first n
// elements of the same field of b.
func samePrefix(a, b state.Doc, name string, n int) bool {
	for i := range n {
		x, _ := a.Element(name, i)
		y, _ := b.Element(name, i)
		if !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// lgRun reads refs of one namespace, seqs descending, in one walk.
func (s *Saver) lgRun(ctx context.Context, refs []lgRef) ([]lgTuple, error) {
	t, err := s.resolve(ctx, refs[0].ThreadID, refs[0].NS)
	if err != nil {
		return nil, err
	}
	if _, err := s.thread(ctx, t.id); err != nil {
		return nil, err
	}
	want := map[int64]bool{}
	for _, ref := range refs {
		want[ref.Seq] = true
	}
	last := refs[len(refs)-1].Seq
	var out []lgTuple
	hr := store.HistoryRequest{Thread: t.thread, Namespace: t.ns, Before: refs[0].Seq + 1, WithState: true, PageSize: len(refs)}
	for cp, err := range s.store.History(ctx, hr) {
		if err != nil {
			return nil, err
		}
		if want[cp.Seq] {
			tu, err := s.lgTupleOf(ctx, t, cp)
			if err != nil {
				return nil, err
			}
			out = append(out, tu)
		}
		if cp.Seq <= last {
			break
		}
	}
	if len(out) != len(refs) {
		return nil, notFound("thread %q namespace %q: %d of %d listed checkpoints are gone", t.id, t.lgNS, len(refs)-len(out), len(refs))
	}
	return out, nil
}

// deleteCheckpoints deletes a thread with its checkpoints and writes; a
// missing thread (or another tenant's) is a 404, which the saver takes
// as done.
func (s *Saver) deleteCheckpoints(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	if err := s.store.DeleteThread(ctx, th.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.index.forget(th.ID)
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
	return nil
}

// copyCheckpoints copies a thread, its history and writes, to a new id.
func (s *Saver) copyCheckpoints(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Target string `json:"target_thread_id"`
	}
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if err := store.ValidateID(req.Target); err != nil {
		return unprocessable("$.target_thread_id", "%v", err)
	}
	ctx := r.Context()
	th, err := s.thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	cp, err := s.store.CopyThread(ctx, th.ID, s.key(ctx, req.Target))
	if errors.Is(err, store.ErrConflict) {
		return conflict("thread %q already exists", req.Target)
	}
	if err != nil {
		return err
	}
	s.index.forget(cp.ID)
	writeJSON(w, http.StatusOK, map[string]any{"thread_id": s.id(cp.ID)})
	return nil
}

// pruneCheckpoints keeps the newest checkpoints of threads
// (keep_latest, keep_last per branch of each namespace, with what they
// need to be rebuilt) or deletes them (delete).
func (s *Saver) pruneCheckpoints(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ThreadIDs []string `json:"thread_ids"`
		Strategy  string   `json:"strategy"`
		KeepLast  int      `json:"keep_last"`
	}
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if err := oneOf("$.strategy", req.Strategy, "keep_latest", "delete"); err != nil {
		return err
	}
	if req.KeepLast < 0 {
		return unprocessable("$.keep_last", "must not be negative")
	}
	ctx := r.Context()
	var res store.PruneResult
	for i, id := range req.ThreadIDs {
		th, err := s.thread(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return unprocessable(fmt.Sprintf("$.thread_ids[%d]", i), "%v", err)
		}
		if req.Strategy == "delete" {
			if err := s.store.DeleteThread(ctx, th.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			s.index.forget(th.ID)
			res.Deleted = append(res.Deleted, s.id(th.ID))
			continue
		}
		got, err := s.store.Prune(ctx, store.PruneRequest{Thread: th.ID, KeepLast: max(1, req.KeepLast)})
		if err != nil {
			return err
		}
		res.Threads += got.Threads
		res.Checkpoints += got.Checkpoints
		res.Bytes += got.Bytes
		for _, b := range got.Busy {
			res.Busy = append(res.Busy, s.id(b))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"threads": res.Threads, "checkpoints": res.Checkpoints, "bytes": res.Bytes, "deleted": res.Deleted, "busy": res.Busy})
	return nil
}
