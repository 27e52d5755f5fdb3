package server

import (
	"bytes"
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
	Strategy  string   `json:"strategy"`
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
	if len(q.ThreadIDs) == 0 || len(q.ThreadIDs) > maxPrune {
		return unprocessable("$.thread_ids", "%d threads: want 1 to %d", len(q.ThreadIDs), maxPrune)
	}
	ctx := r.Context()
	ths := make([]store.Thread, 0, len(q.ThreadIDs))
	for i, id := range q.ThreadIDs {
		th, err := s.svc.Thread(ctx, id)
		if err != nil {
			return fmt.Errorf("$.thread_ids[%d]: %w", i, err)
		}
		if s.svc.Busy(ctx, th.ID) {
			return conflict("$.thread_ids[%d]: thread %q has a run in progress; cancel it first", i, id)
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
