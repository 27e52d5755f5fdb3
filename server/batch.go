package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// postRunBatch creates stateless background runs (POST /runs/batch): all
// checked before any is made; the answer lists them as POST /runs
// answers one.
func (s *Server) postRunBatch(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	var items []map[string]json.RawMessage
	if err := decodeJSON(data, &items); err != nil {
		return err
	}
	for i, item := range items {
		if err := snakeKeys(fmt.Sprintf("$[%d]", i), item); err != nil {
			return err
		}
	}
	data, _ = json.Marshal(items) // raw JSON values always marshal
	var qs []runs.Request
	if err := decodeJSON(data, &qs); err != nil {
		return err
	}
	made, err := s.svc.CreateBatch(r.Context(), qs)
	if err != nil {
		return err
	}
	out := make([]runs.RunView, 0, len(made))
	for _, lr := range made {
		v, err := runs.RunViewOf(lr.Record())
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// snakeKeys renames the camelCase keys of a batch's run to the API's
// snake_case ones: the official JS SDK's createBatch sends its payloads'
// camelCase fields (assistantId, multitaskStrategy, onCompletion…) as
// they are, beside assistant_id. A key given both ways with different
// values is an error naming it.
func snakeKeys(at string, item map[string]json.RawMessage) error {
	for k, v := range item {
		snake := snakeCase(k)
		if snake == k {
			continue
		}
		delete(item, k)
		if prev, ok := item[snake]; ok && !bytes.Equal(bytes.TrimSpace(prev), bytes.TrimSpace(v)) {
			return unprocessable(at+"."+k, "differs from %s", snake)
		}
		item[snake] = v
	}
	return nil
}

// snakeCase is a camelCase name in snake_case ("_langsmithTracer":
// "_langsmith_tracer").
func snakeCase(k string) string {
	var b strings.Builder
	for i, c := range k {
		if unicode.IsUpper(c) {
			if i > 0 {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// maxPrune bounds the threads of one prune request.
const maxPrune = 1000

type pruneRequest struct {
	ThreadIDs []string `json:"thread_ids"`
	// Filter picks the threads as POST /threads/search does (metadata,
	// status, values, ids), instead of thread_ids (Cairn's).
	Filter   *pruneFilter `json:"filter"`
	Strategy string       `json:"strategy"`
}

// pruneFilter is the part of a thread search a prune takes.
type pruneFilter struct {
	Metadata map[string]any `json:"metadata"`
	IDs      []string       `json:"ids"`
	Values   map[string]any `json:"values"`
	Status   string         `json:"status"`
}

// pruneIDs are the ids of the threads a prune names: its thread_ids, or
// those its filter matches (up to maxPrune).
func (s *Server) pruneIDs(ctx context.Context, q pruneRequest) ([]string, string, error) {
	switch {
	case q.Filter != nil && len(q.ThreadIDs) > 0:
		return nil, "", unprocessable("$.filter", "name threads by thread_ids or by a filter, not both")
	case q.Filter == nil:
		if len(q.ThreadIDs) == 0 || len(q.ThreadIDs) > maxPrune {
			return nil, "", unprocessable("$.thread_ids", "%d threads: want 1 to %d (or a filter)", len(q.ThreadIDs), maxPrune)
		}
		return q.ThreadIDs, "$.thread_ids", nil
	}
	f := threadSearch{Metadata: q.Filter.Metadata, IDs: q.Filter.IDs, Values: q.Filter.Values, Status: q.Filter.Status}
	if err := f.check(); err != nil {
		return nil, "", err
	}
	views, total, err := s.findThreads(ctx, f, 0, maxPrune)
	if err != nil {
		return nil, "", err
	}
	if total > maxPrune {
		return nil, "", unprocessable("$.filter", "matches %d threads: at most %d at once; narrow it", total, maxPrune)
	}
	ids := make([]string, len(views))
	for i, v := range views {
		ids[i] = v.ThreadID
	}
	return ids, "$.filter", nil
}

// pruneThreads prunes threads by id (POST /threads/prune, as LangGraph's):
// strategy delete (the default) deletes them, keep_latest keeps each
// branch's newest checkpoint and deletes the history below it
// (store.Prune with KeepLast 1: what is kept still rebuilds). Every id is
// checked first — the caller's thread, no run in progress — so a missing
// or busy one is an error naming it and nothing is pruned. The answer
// counts the threads deleted or that lost checkpoints.
func (s *Server) pruneThreads(w http.ResponseWriter, r *http.Request) error {
	var q pruneRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	if q.Strategy == "" {
		q.Strategy = "delete"
	}
	if err := runs.OneOf("$.strategy", q.Strategy, "delete", "keep_latest"); err != nil {
		return err
	}
	ctx := r.Context()
	ids, path, err := s.pruneIDs(ctx, q)
	if err != nil {
		return err
	}
	ths := make([]store.Thread, 0, len(ids))
	for i, id := range ids {
		th, err := s.svc.Thread(ctx, id)
		if err != nil {
			return fmt.Errorf("%s[%d]: %w", path, i, err)
		}
		if s.svc.Busy(ctx, th.ID) {
			return conflict("%s[%d]: thread %q has a run in progress; cancel it first", path, i, id)
		}
		ths = append(ths, th)
	}
	n := 0
	for _, th := range ths {
		if q.Strategy == "delete" {
			if err := s.store.DeleteThread(ctx, th.ID); err != nil {
				return err
			}
			n++
			continue
		}
		res, err := s.store.Prune(ctx, store.PruneRequest{Thread: th.ID, KeepLast: 1})
		if err != nil {
			return err
		}
		n += res.Threads
	}
	writeJSON(w, http.StatusOK, map[string]int{"pruned_count": n})
	return nil
}
