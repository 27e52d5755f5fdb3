package server

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// listInterrupts lists the tenant's pending interrupts across threads,
// oldest first, filtered by assistant and thread metadata.
func (s *Server) listInterrupts(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	if st := qs.Get("status"); st != "" && st != "pending" {
		return unprocessable("status", "%q: only pending interrupts are listed; answered ones are in each thread's history (metadata.cairn.approval)", st)
	}
	var md map[string]any
	if m := qs.Get("metadata"); m != "" {
		if err := json.Unmarshal([]byte(m), &md); err != nil {
			return unprocessable("metadata", "want a JSON object: %v", err)
		}
	}
	limit, err := queryInt(r, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	ctx := r.Context()
	ths, err := s.pausedThreads(ctx, md, qs.Get("assistant_id"), offset, limit)
	if err != nil {
		return err
	}
	out := []runs.Pending{}
	for _, th := range ths {
		p, _, err := s.svc.PendingOf(ctx, th)
		if err != nil {
			return err
		}
		if p != nil { // answered since it was listed
			out = append(out, *p)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// threadInterrupts lists a thread's pending interrupt (none or one).
func (s *Server) threadInterrupts(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	p, _, err := s.svc.PendingOf(ctx, th)
	if err != nil {
		return err
	}
	out := []runs.Pending{}
	if p != nil {
		out = append(out, *p)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type answerRequest struct {
	Action string          `json:"action"`
	Value  json.RawMessage `json:"value"`
	Reason string          `json:"reason"`
	// By names who answers, when the server has no API keys (with keys,
	// the key answers).
	By string `json:"by"`
}

// answerInterrupt approves, edits or rejects a pending interrupt: a run
// resumes the thread with the answer, which the next checkpoint records
// with who gave it and when.
func (s *Server) answerInterrupt(w http.ResponseWriter, r *http.Request) error {
	var q answerRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	ctx := r.Context()
	if err := store.ValidateID(r.PathValue("thread_id")); err != nil {
		return notFound("thread %q not found", r.PathValue("thread_id"))
	}
	by := callerOf(ctx)
	if by == "" {
		by = cmp.Or(q.By, "anonymous")
	}
	a := flow.Approval{Action: q.Action, Value: q.Value, Reason: q.Reason, By: by, At: s.cfg.Now().UTC()}
	if err := a.Check(); err != nil {
		return unprocessable("$.action", "%v", err)
	}
	lr, err := s.svc.Answer(ctx, r.PathValue("thread_id"), r.PathValue("interrupt_id"), a)
	if err != nil {
		return err
	}
	v, err := runs.RunViewOf(lr.Record())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

type callerKey struct{}

func withCaller(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, callerKey{}, who)
}

// callerOf names the API key a request came with ("" without keys).
func callerOf(ctx context.Context) string {
	who, _ := ctx.Value(callerKey{}).(string)
	return who
}
