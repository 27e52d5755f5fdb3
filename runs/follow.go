package runs

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// RunOf returns a run of the caller's tenant on a thread (both by the
// ids the tenant knows); another tenant's, or another thread's, is not
// found.
func (s *Service) RunOf(ctx context.Context, thread, id string) (store.RunRecord, error) {
	th, err := s.Thread(ctx, thread)
	if err != nil {
		return store.RunRecord{}, err
	}
	if err := store.ValidateID(id); err != nil {
		return store.RunRecord{}, newError(ErrNotFound, "run %q not found", id)
	}
	if lr := s.runs.get(id); lr != nil {
		if rec := lr.Record(); rec.Thread == th.ID && rec.Tenant == TenantOf(ctx) {
			return rec, nil
		}
	}
	rec, err := s.runlog.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Thread != th.ID || rec.Tenant != TenantOf(ctx))) {
		return store.RunRecord{}, newError(ErrNotFound, "run %q not found on thread %q", id, thread)
	}
	return rec, err
}

// StoredOutcome is the outcome of a run this process does not have in
// hand: ended (its thread's state, or its error) or run elsewhere (waited
// for by polling its record).
func (s *Service) StoredOutcome(ctx context.Context, rec store.RunRecord) (*Outcome, error) {
	for !Terminal(rec.Status) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		if rec, err = s.runlog.Run(ctx, rec.ID); err != nil {
			return nil, err
		}
	}
	d, err := DataOf(rec)
	if err != nil {
		return nil, err
	}
	return s.runs.finalValues(ctx, &Run{rec: rec, data: d}), nil
}

// Source reads the events of a run's stream: each call returns the events
// not yet returned, whether the stream is complete, and a channel closed
// when more may be read.
type Source func(ctx context.Context) ([]*Event, bool, <-chan struct{}, error)

// Events reads a run's events after event (after, attempt): from its
// live log when this process runs it, else from the store, polling while
// the run goes on elsewhere.
func (s *Service) Events(lr *Run, rec store.RunRecord, after int64, attempt int) Source {
	if lr == nil || lr.log == nil {
		lr = s.runs.get(rec.ID)
	}
	if lr != nil {
		after = lr.log.resume(after, attempt)
		return func(context.Context) ([]*Event, bool, <-chan struct{}, error) {
			evs, done, wake := lr.log.since(after)
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			return evs, done, wake, nil
		}
	}
	st := &storedSource{s: s, rec: rec, after: after, attempt: attempt, settled: after == 0, redact: true}
	if d, err := DataOf(rec); err == nil {
		st.redact = s.RedactsFor(d.Graph())
	}
	return st.next
}

// storedSource reads a run's log from the store.
type storedSource struct {
	s       *Service
	rec     store.RunRecord
	after   int64
	attempt int
	// settled: after is where the reader goes on (see resumeAfter).
	settled bool
	// redact: what is built from the state is redacted (eventRef.redact).
	redact bool
}

func (st *storedSource) next(ctx context.Context) ([]*Event, bool, <-chan struct{}, error) {
	if !st.settled {
		if err := st.settle(ctx); err != nil || !st.settled {
			return nil, false, after100ms(), err
		}
	}
	evs, err := storedEvents(ctx, st.s.runlog, st.rec.ID, st.rec.Thread, st.redact, st.after, 1000)
	if err != nil || len(evs) > 0 {
		if len(evs) > 0 {
			st.after = evs[len(evs)-1].Seq
		}
		return evs, false, closedChan, err
	}
	if Terminal(st.rec.Status) {
		return nil, true, nil, nil
	}
	if st.rec, err = st.s.runlog.Run(ctx, st.rec.ID); err != nil {
		return nil, false, nil, err
	}
	if Terminal(st.rec.Status) {
		return nil, false, closedChan, nil // read what it logged last
	}
	return nil, false, after100ms(), nil
}

// settle finds where a reader holding event (after, attempt) goes on in
// the stored log; the log may still grow with the reader's attempt while
// the run goes on at that attempt elsewhere.
func (st *storedSource) settle(ctx context.Context) error {
	rec, err := st.s.runlog.Run(ctx, st.rec.ID)
	if err != nil {
		return err
	}
	st.rec = rec
	d, err := DataOf(rec)
	if err != nil {
		return err
	}
	evs, err := storedEvents(ctx, st.s.runlog, rec.ID, rec.Thread, st.redact, 0, 0)
	if err != nil {
		return err
	}
	ended := Terminal(rec.Status) || !sameAttempt(d.Attempt, st.attempt)
	st.after, st.settled = resumeAfter(evs, st.after, st.attempt, ended)
	return nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// after100ms is closed a moment from now: how often a run on another
// server is polled.
func after100ms() <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() { close(c) })
	return c
}

// Local returns a run as this process runs it: lr when it does (a run the
// caller created here), else the run of id it has in hand (running or
// waiting for its thread), else nil (a queued run a worker runs, or one
// that has ended).
func (s *Service) Local(lr *Run, id string) *Run {
	if lr != nil && lr.log != nil {
		return lr
	}
	return s.runs.get(id)
}

// ErrorOutcome is the outcome of a run whose outcome could not be read.
func ErrorOutcome(err error) *Outcome {
	return &Outcome{fixed: raw(map[string]any{"__error__": map[string]string{"error": "RunError", "message": err.Error()}})}
}

// Write writes the outcome to w.
func (o *Outcome) Write(w io.Writer) error { return o.write(w) }

// Runs lists a thread's runs newest first (status: only those; empty:
// all), each with the status this process knows of the runs it has in
// hand.
func (s *Service) Runs(ctx context.Context, th store.Thread, status string, limit, offset int) ([]store.RunRecord, error) {
	q := store.RunQuery{Tenant: TenantOf(ctx), Thread: th.ID, Limit: limit, Offset: offset}
	if status != "" {
		if err := OneOf("status", status, StatusPending, StatusRunning, StatusSuccess, StatusError, StatusInterrupted, "timeout"); err != nil {
			return nil, err
		}
		q.Status = []string{status}
	}
	recs, err := s.runlog.Runs(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if lr := s.runs.get(recs[i].ID); lr != nil {
			recs[i].Status = lr.Record().Status
		}
	}
	return recs, nil
}

// DeleteRun deletes a run that has ended, with its event log.
func (s *Service) DeleteRun(ctx context.Context, rec store.RunRecord) error {
	if s.runs.get(rec.ID) != nil {
		return newError(ErrState, "run %s is %s; cancel it first", rec.ID, rec.Status)
	}
	return s.runlog.DeleteRun(ctx, rec.ID)
}

// Cancel stops a run: action interrupt keeps what it committed, rollback
// also returns the thread to where the run began and deletes the run. A
// run waiting for its thread ends at once; a queued run no worker has
// taken too, a running one is stopped by its worker before its next
// commit. wait: Cancel returns once the run has stopped.
func (s *Service) Cancel(ctx context.Context, rec store.RunRecord, action string, wait bool) error {
	if err := OneOf("action", action, "interrupt", "rollback"); err != nil {
		return err
	}
	lr := s.runs.get(rec.ID)
	if lr != nil {
		// A run that has not started (pending: its after_seconds, its
		// thread's lease) ends at once: the answer waits for that, as
		// LangGraph's cancel of a pending run leaves it interrupted.
		pending := lr.Record().Status == StatusPending
		if err := s.runs.cancel(ctx, lr, action); err != nil || !wait && !pending {
			return err
		}
		select {
		case <-lr.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case Terminal(rec.Status):
		return newError(ErrState, "run %s has already ended (%s)", rec.ID, rec.Status)
	case s.queue == nil:
		return newError(ErrState, "run %s is %s on another server; cancel it there", rec.ID, rec.Status)
	}
	if err := s.cancelQueued(ctx, rec, action); err != nil || !wait {
		return err
	}
	// A rolled back run is deleted once its worker has undone it.
	if _, err := s.StoredOutcome(ctx, rec); err != nil && (action != "rollback" || !errors.Is(err, store.ErrNotFound)) {
		return err
	}
	return nil
}

// CancelLive cancels a run this process has in hand (its client went away
// and asked for that), if it still does.
func (s *Service) CancelLive(ctx context.Context, id string) {
	if lr := s.runs.get(id); lr != nil {
		_ = s.runs.cancel(ctx, lr, "interrupt")
	}
}
