package runs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// Pending is a pending interrupt as GET /interrupts lists it.
type Pending struct {
	InterruptID    string          `json:"interrupt_id"`
	ThreadID       string          `json:"thread_id"`
	AssistantID    string          `json:"assistant_id"`
	CheckpointID   string          `json:"checkpoint_id"`
	CheckpointNS   string          `json:"checkpoint_ns"`
	Node           string          `json:"node"`
	Value          json.RawMessage `json:"value"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
	Status         string          `json:"status"`
	CreatedAt      string          `json:"created_at"`
	ExpiresAt      *string         `json:"expires_at"`
	Fallback       string          `json:"fallback,omitempty"`
	ThreadMetadata map[string]any  `json:"thread_metadata"`
}

// PendingOf is the pending interrupt at a thread's head, if any.
func (s *Service) PendingOf(ctx context.Context, th store.Thread) (*Pending, store.Checkpoint, error) {
	if th.Head == 0 {
		return nil, store.Checkpoint{}, nil
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
	if err != nil {
		return nil, head, err
	}
	in, _ := PauseOf(head)
	if in == nil {
		return nil, head, nil
	}
	p := &Pending{InterruptID: in.ID, ThreadID: APIThreadID(th.ID), CheckpointID: CheckpointID(head.Seq), Node: InterruptNode(head), Value: in.Value, ResponseSchema: in.ResponseSchema,
		Status: "pending", CreatedAt: APITime(head.CreatedAt), ThreadMetadata: th.Metadata}
	if p.ThreadMetadata == nil {
		p.ThreadMetadata = map[string]any{}
	}
	if a, err := s.ThreadAssistant(ctx, th); err == nil {
		info := a.Info()
		p.AssistantID = info.ID
		if info.ApprovalTimeout > 0 {
			exp := APITime(head.CreatedAt.Add(info.ApprovalTimeout))
			p.ExpiresAt, p.Fallback = &exp, info.ApprovalFallback
		}
	}
	return p, head, nil
}

// Answer starts the run that resumes a thread's pending interrupt id with
// an approval.
func (s *Service) Answer(ctx context.Context, thread, id string, a flow.Approval) (*Run, error) {
	th, err := s.Thread(ctx, thread)
	if err != nil {
		return nil, err
	}
	p, head, err := s.PendingOf(ctx, th)
	if err != nil {
		return nil, err
	}
	if p == nil || p.InterruptID != id {
		return nil, newError(ErrState, "interrupt %s is not pending on thread %s (answered, expired, or the thread moved on)", id, APIThreadID(th.ID))
	}
	as, err := s.ThreadAssistant(ctx, th)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	if err := checkAnswer(head, "$", a); err != nil {
		return nil, err
	}
	if err := s.checkResume(ctx, as, th, "$", raw); err != nil {
		return nil, err
	}
	return s.Create(ctx, APIThreadID(th.ID), Request{AssistantID: as.Info().ID, approval: &a, StreamMode: StringList{"values", "updates", "messages-tuple"}})
}

// expiries answers pauses that waited longer than their assistant's
// approval timeout with its fallback.
type expiries struct {
	s  *Service
	mu sync.Mutex
	// due: thread → when its pause expires, and the pause's interrupt.
	due map[string]expiry
}

type expiry struct {
	at          time.Time
	InterruptID string
	tenant      string
	fallback    string
	timeout     time.Duration
}

// watch notes a thread's pause if its assistant bounds the wait.
func (e *expiries) watch(ctx context.Context, th store.Thread) {
	p, head, err := e.s.PendingOf(ctx, th)
	if err != nil || p == nil || p.ExpiresAt == nil {
		return
	}
	a, err := e.s.ThreadAssistant(ctx, th)
	if err != nil {
		return
	}
	info := a.Info()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.due[th.ID] = expiry{at: head.CreatedAt.Add(info.ApprovalTimeout), InterruptID: p.InterruptID, tenant: th.Tenant, fallback: info.ApprovalFallback, timeout: info.ApprovalTimeout}
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
		if e.s.Busy(context.Background(), thread) {
			continue
		}
		ctx := WithTenant(context.Background(), x.tenant)
		a := flow.Approval{Action: x.fallback, By: "timeout", Reason: "no answer within " + x.timeout.String(), At: now.UTC()}
		_, err := e.s.Answer(ctx, APIThreadID(thread), x.InterruptID, a)
		if err != nil && !refused(err) && !errors.Is(err, store.ErrNotFound) {
			e.s.log.Warn("answering an expired pause failed", "thread", thread, "err", err)
			continue
		}
		e.mu.Lock()
		if e.due[thread].InterruptID == x.InterruptID {
			delete(e.due, thread)
		}
		e.mu.Unlock()
	}
}

// start watches the pause of every interrupted thread (the thread index
// lists them), then sweeps until the service stops.
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

// checkAnswer checks an answer to the pause at head (a command's resume
// value under root "$.command.resume", an approval's body under "$")
// against the pause's response_schema: a 422 naming the interrupt and
// the place in the answer that does not fit.
func checkAnswer(head store.Checkpoint, root string, answer any) error {
	err := flow.CheckResponse(head, answer)
	var re *flow.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	if _, ok := answer.(flow.Approval); ok {
		root += ".value"
	}
	in, _ := PauseOf(head)
	path := re.JSONPath(root)
	return invalid(path, "does not fit the response_schema of interrupt %s (node %q) at %s: %s", in.ID, re.Node, path, re.Msg)
}
