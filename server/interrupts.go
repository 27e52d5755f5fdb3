package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// apiPending is a pending interrupt as GET /interrupts lists it.
type apiPending struct {
	InterruptID    string          `json:"interrupt_id"`
	ThreadID       string          `json:"thread_id"`
	AssistantID    string          `json:"assistant_id"`
	CheckpointID   string          `json:"checkpoint_id"`
	CheckpointNS   string          `json:"checkpoint_ns"`
	Node           string          `json:"node"`
	Value          json.RawMessage `json:"value"`
	Status         string          `json:"status"`
	CreatedAt      string          `json:"created_at"`
	ExpiresAt      *string         `json:"expires_at"`
	Fallback       string          `json:"fallback,omitempty"`
	ThreadMetadata map[string]any  `json:"thread_metadata"`
}

// pendingOf is the pending interrupt at a thread's head, if any.
func (s *Server) pendingOf(ctx context.Context, th store.Thread) (*apiPending, store.Checkpoint, error) {
	if th.Head == 0 {
		return nil, store.Checkpoint{}, nil
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
	if err != nil {
		return nil, head, err
	}
	in, _ := pauseOf(head)
	if in == nil {
		return nil, head, nil
	}
	p := &apiPending{InterruptID: in.ID, ThreadID: apiThreadID(th.ID), CheckpointID: checkpointID(head.Seq), Node: interruptNode(head), Value: in.Value,
		Status: "pending", CreatedAt: apiTime(head.CreatedAt), ThreadMetadata: th.Metadata}
	if p.ThreadMetadata == nil {
		p.ThreadMetadata = map[string]any{}
	}
	if a, err := s.threadAssistant(ctx, th); err == nil {
		info := a.Info()
		p.AssistantID = info.ID
		if info.ApprovalTimeout > 0 {
			exp := apiTime(head.CreatedAt.Add(info.ApprovalTimeout))
			p.ExpiresAt, p.Fallback = &exp, info.ApprovalFallback
		}
	}
	return p, head, nil
}

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
	out := []apiPending{}
	for _, th := range ths {
		p, _, err := s.pendingOf(ctx, th)
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
	th, err := s.thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	p, _, err := s.pendingOf(ctx, th)
	if err != nil {
		return err
	}
	out := []apiPending{}
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
	lr, err := s.answer(ctx, r.PathValue("thread_id"), r.PathValue("interrupt_id"), a)
	if err != nil {
		return err
	}
	v, _, err := apiRunOf(lr.record())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// answer starts the run that resumes a thread's pending interrupt id with
// an approval.
func (s *Server) answer(ctx context.Context, thread, id string, a flow.Approval) (*liveRun, error) {
	th, err := s.thread(ctx, thread)
	if err != nil {
		return nil, err
	}
	p, _, err := s.pendingOf(ctx, th)
	if err != nil {
		return nil, err
	}
	if p == nil || p.InterruptID != id {
		return nil, conflict("interrupt %s is not pending on thread %s (answered, expired, or the thread moved on)", id, apiThreadID(th.ID))
	}
	as, err := s.threadAssistant(ctx, th)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	if err := s.checkResume(ctx, as, th, "$", raw); err != nil {
		return nil, err
	}
	return s.createRun(ctx, apiThreadID(th.ID), runRequest{AssistantID: as.Info().ID, approval: &a, StreamMode: stringList{"values", "updates", "messages-tuple"}})
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

// expiries answers pauses that waited longer than their assistant's
// approval timeout with its fallback.
type expiries struct {
	s  *Server
	mu sync.Mutex
	// due: thread → when its pause expires, and the pause's interrupt.
	due map[string]expiry
}

type expiry struct {
	at          time.Time
	interruptID string
	tenant      string
	fallback    string
	timeout     time.Duration
}

// watch notes a thread's pause if its assistant bounds the wait.
func (e *expiries) watch(ctx context.Context, th store.Thread) {
	p, head, err := e.s.pendingOf(ctx, th)
	if err != nil || p == nil || p.ExpiresAt == nil {
		return
	}
	a, err := e.s.threadAssistant(ctx, th)
	if err != nil {
		return
	}
	info := a.Info()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.due[th.ID] = expiry{at: head.CreatedAt.Add(info.ApprovalTimeout), interruptID: p.InterruptID, tenant: th.Tenant, fallback: info.ApprovalFallback, timeout: info.ApprovalTimeout}
}

// sweep answers the expired pauses; a busy thread waits for the next sweep.
func (e *expiries) sweep(now time.Time) {
	e.mu.Lock()
	var ready []string
	for thread, x := range e.due {
		if !now.Before(x.at) {
			ready = append(ready, thread)
		}
	}
	e.mu.Unlock()
	for _, thread := range ready {
		e.mu.Lock()
		x := e.due[thread]
		e.mu.Unlock()
		if e.s.busy(context.Background(), thread) {
			continue
		}
		ctx := withTenant(context.Background(), x.tenant)
		a := flow.Approval{Action: x.fallback, By: "timeout", Reason: "no answer within " + x.timeout.String(), At: now.UTC()}
		_, err := e.s.answer(ctx, apiThreadID(thread), x.interruptID, a)
		if err != nil && statusOf(err) != http.StatusConflict && !errors.Is(err, store.ErrNotFound) && statusOf(err) != http.StatusNotFound {
			e.s.log.Warn("answering an expired pause failed", "thread", thread, "err", err)
			continue
		}
		e.mu.Lock()
		if e.due[thread].interruptID == x.interruptID {
			delete(e.due, thread)
		}
		e.mu.Unlock()
	}
}

// start watches the pause of every interrupted thread (the thread index
// lists them), then sweeps until the server stops.
func (e *expiries) start(ctx context.Context, every time.Duration) error {
	ths, err := e.s.store.ListThreads(ctx, store.ThreadSearch{AllTenants: true, Status: []store.ThreadStatus{store.ThreadInterrupted}, Sort: store.SortStatusAt})
	if err != nil {
		return err
	}
	for _, th := range ths {
		e.watch(ctx, th)
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-e.s.runs.base.Done():
				return
			case now := <-t.C:
				e.sweep(now)
			}
		}
	}()
	return nil
}
