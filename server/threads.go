package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// threadView is a thread as the API shows it: its head state, status and
// pending interrupts.
func (s *Server) threadView(ctx context.Context, th store.Thread) (apiThread, error) {
	v := apiThread{ThreadID: runs.APIThreadID(th.ID), CreatedAt: runs.APITime(th.CreatedAt), UpdatedAt: runs.APITime(th.UpdatedAt), StateUpdatedAt: runs.APITime(th.UpdatedAt),
		Metadata: th.Metadata, Status: "idle", Values: json.RawMessage("{}"), Interrupts: map[string][]runs.Interrupt{}}
	if v.Metadata == nil {
		v.Metadata = map[string]any{}
	}
	if th.Head > 0 {
		head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
		if err != nil {
			return v, err
		}
		st := runs.StateView(head)
		v.Values = st.Values
		v.Status = checkpointStatus(head)
		for _, t := range st.Tasks {
			if len(t.Interrupts) > 0 {
				v.Interrupts[t.ID] = t.Interrupts
			}
		}
	}
	if s.svc.Busy(ctx, th.ID) {
		v.Status = "busy"
	}
	return v, nil
}

// checkpointStatus is the status a thread whose head is cp has when no
// run is on it: the one the store's thread index holds for it.
func checkpointStatus(cp store.Checkpoint) string {
	return store.ThreadStatusOf(cp).String()
}

type threadCreate struct {
	ThreadID   string          `json:"thread_id"`
	Metadata   map[string]any  `json:"metadata"`
	IfExists   string          `json:"if_exists"`
	Supersteps json.RawMessage `json:"supersteps"`
	TTL        json.RawMessage `json:"ttl"`
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request) error {
	var req threadCreate
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	steps, a, err := s.svc.CheckSupersteps(ctx, req.Supersteps, req.Metadata)
	if err != nil {
		return err
	}
	if err := setTTL(req.TTL, &req.Metadata); err != nil {
		return err
	}
	switch req.IfExists {
	case "", "raise", "do_nothing":
	default:
		return unprocessable("$.if_exists", "%q: want raise or do_nothing", req.IfExists)
	}
	if req.ThreadID == "" {
		req.ThreadID = uuid.NewString()
	} else if err := store.ValidateID(req.ThreadID); err != nil {
		return unprocessable("$.thread_id", "%v", err)
	}
	th, err := s.store.CreateThread(ctx, store.Thread{ID: runs.ThreadKey(ctx, req.ThreadID), Tenant: runs.TenantOf(ctx), Metadata: req.Metadata})
	if errors.Is(err, store.ErrConflict) {
		old, gerr := s.svc.Thread(ctx, req.ThreadID)
		if gerr != nil || req.IfExists != "do_nothing" {
			return conflict("thread %q already exists", req.ThreadID)
		}
		return s.writeThread(ctx, w, old) // its own history stays: no supersteps
	}
	if err != nil {
		return err
	}
	if err := s.svc.ApplySupersteps(ctx, th, a, steps); err != nil {
		return err
	}
	if th, err = s.svc.Thread(ctx, req.ThreadID); err != nil {
		return err
	}
	return s.writeThread(ctx, w, th)
}

// setTTL reads a thread's ttl (minutes, or {ttl: minutes, strategy:
// "delete"}) into its metadata (store.ThreadTTLKey), where the retention
// sweep finds it.
func setTTL(raw json.RawMessage, md *map[string]any) error {
	if v := strings.TrimSpace(string(raw)); v == "" || v == "null" {
		return nil
	}
	var c struct {
		TTL      float64 `json:"ttl"`
		Strategy string  `json:"strategy"`
	}
	if err := json.Unmarshal(raw, &c.TTL); err != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return unprocessable("$.ttl", "want minutes, or {ttl: minutes, strategy: \"delete\"}: %v", err)
		}
	}
	if c.Strategy != "" && c.Strategy != "delete" {
		return unprocessable("$.ttl.strategy", "%q: Cairn deletes a thread when its time to live ends (delete)", c.Strategy)
	}
	if c.TTL <= 0 {
		return unprocessable("$.ttl", "%g: a time to live is a positive number of minutes", c.TTL)
	}
	if *md == nil {
		*md = map[string]any{}
	}
	(*md)[store.ThreadTTLKey] = c.TTL
	return nil
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	th, err := s.svc.Thread(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	return s.writeThread(r.Context(), w, th)
}

type threadPatch struct {
	Metadata map[string]any  `json:"metadata"`
	TTL      json.RawMessage `json:"ttl"`
}

// patchThread merges metadata into the thread's (a null value removes a
// key), as LangGraph does.
func (s *Server) patchThread(w http.ResponseWriter, r *http.Request) error {
	var req threadPatch
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := setTTL(req.TTL, &req.Metadata); err != nil {
		return err
	}
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	md := maps.Clone(th.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	for k, v := range req.Metadata {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	if th, err = s.store.SetMetadata(ctx, th.ID, md); err != nil {
		return err
	}
	return s.writeThread(ctx, w, th)
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	if s.svc.Busy(ctx, th.ID) {
		return conflict("thread %q has a run in progress; cancel it first", runs.APIThreadID(th.ID))
	}
	if err := s.store.DeleteThread(ctx, th.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type threadSearch struct {
	Metadata  map[string]any  `json:"metadata"`
	IDs       []string        `json:"ids"`
	Values    map[string]any  `json:"values"`
	Status    string          `json:"status"`
	Limit     *int            `json:"limit"`
	Offset    int             `json:"offset"`
	SortBy    string          `json:"sort_by"`
	SortOrder string          `json:"sort_order"`
	Select    []string        `json:"select"`
	Extract   json.RawMessage `json:"extract"`
}

func (q *threadSearch) check() error {
	if err := runs.Unsupported(map[string]json.RawMessage{"extract": q.Extract}); err != nil {
		return err
	}
	switch q.Status {
	case "", "idle", "busy", "interrupted", "error":
	default:
		return unprocessable("$.status", "%q: want idle, busy, interrupted or error", q.Status)
	}
	switch q.SortBy {
	case "", "thread_id", "status", "created_at", "updated_at", "state_updated_at":
	default:
		return unprocessable("$.sort_by", "%q: want thread_id, status, created_at, updated_at or state_updated_at", q.SortBy)
	}
	switch q.SortOrder {
	case "", "asc", "desc":
	default:
		return unprocessable("$.sort_order", "%q: want asc or desc", q.SortOrder)
	}
	if q.Limit != nil && (*q.Limit < 0 || *q.Limit > 1000) {
		return unprocessable("$.limit", "%d: want 0 to 1000", *q.Limit)
	}
	if q.Offset < 0 {
		return unprocessable("$.offset", "%d: must not be negative", q.Offset)
	}
	for k, v := range q.Metadata {
		switch v.(type) {
		case string, float64, bool, nil:
		default:
			return unprocessable("$.metadata."+k, "metadata filters match scalar values (string, number, boolean, null)")
		}
	}
	return nil
}

// searchThreads lists a page of the tenant's threads matching the
// query, newest first unless sort_by says otherwise, through the store's
// thread index (listing.go).
func (s *Server) searchThreads(w http.ResponseWriter, r *http.Request) error {
	var q threadSearch
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	if err := q.check(); err != nil {
		return err
	}
	limit := 10
	if q.Limit != nil {
		limit = *q.Limit
	}
	views, total, err := s.findThreads(r.Context(), q, q.Offset, limit)
	if err != nil {
		return err
	}
	if int64(q.Offset+len(views)) < total {
		w.Header().Set("X-Pagination-Next", fmt.Sprint(q.Offset+len(views)))
	}
	w.Header().Set("X-Pagination-Total", fmt.Sprint(total))
	writeJSON(w, http.StatusOK, selectFields(views, q.Select))
	return nil
}

// selectFields keeps only the selected top-level fields of each item
// (all when select is empty).
func selectFields[T any](items []T, sel []string) any {
	if len(sel) == 0 {
		if items == nil {
			return []T{}
		}
		return items
	}
	out := make([]map[string]json.RawMessage, 0, len(items))
	for _, it := range items {
		b, _ := json.Marshal(it) // API views always marshal
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		keep := map[string]json.RawMessage{}
		for _, f := range sel {
			if v, ok := m[f]; ok {
				keep[f] = v
			}
		}
		out = append(out, keep)
	}
	return out
}

type threadCount struct {
	Metadata map[string]any `json:"metadata"`
	Values   map[string]any `json:"values"`
	Status   string         `json:"status"`
}

func (s *Server) countThreads(w http.ResponseWriter, r *http.Request) error {
	var q threadCount
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	ts := threadSearch{Metadata: q.Metadata, Values: q.Values, Status: q.Status}
	if err := ts.check(); err != nil {
		return err
	}
	ctx := r.Context()
	var n int64
	if len(q.Values) > 0 {
		_, total, err := s.findThreads(ctx, ts, 0, 0)
		if err != nil {
			return err
		}
		n = total
	} else {
		l, err := s.newThreadList(ctx, ts)
		if err != nil {
			return err
		}
		if n, err = l.count(ctx); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

// copyThread copies a thread into a new one: the state of its head
// becomes the first checkpoint of the copy (Store.Fork into the new
// thread; for an interrupted or failed head, the state its unfinished step
// read, with that step scheduled), with the same metadata. History and
// the other namespaces stay with the source.
func (s *Server) copyThread(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	if err := decodeBody(r, &struct{}{}); err != nil {
		return err
	}
	id := uuid.NewString()
	if _, err := s.store.CopyThread(ctx, th.ID, runs.ThreadKey(ctx, id)); err != nil {
		return err
	}
	cp, err := s.svc.Thread(ctx, id)
	if err != nil {
		return err
	}
	return s.writeThread(ctx, w, cp)
}

// writeThread answers with a thread as the API shows it.
func (s *Server) writeThread(ctx context.Context, w http.ResponseWriter, th store.Thread) error {
	v, err := s.threadView(ctx, th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
