package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/backoff"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// runManager runs the service's runs: one at a time per thread, the others
// waiting in order (multitask strategy enqueue), each with its event log.
type runManager struct {
	s  *Service
	mu sync.Mutex
	// threads: the run on each thread and the runs waiting for it.
	threads map[string]*threadRuns
	live    map[string]*Run
	wg      sync.WaitGroup
	closed  bool
	// base is the context of every run; shutdown cancels it.
	base     context.Context
	stopRuns context.CancelCauseFunc
}

type threadRuns struct {
	active  *Run
	waiting []*Run
}

// Run is a run this service is running or will run (or, with a queue,
// has queued). Its executor changes rec and data under mu; others read
// them with Record.
type Run struct {
	mu   sync.Mutex
	rec  store.RunRecord
	data Data
	a    Assistant
	log  *eventLog
	// started: the run's input was committed ((by a previous process)), so
	// it resumes.
	started bool
	ctx     context.Context
	cancel  context.CancelCauseFunc
	done    chan struct{}
	// final is the run's outcome as join and wait answer it.
	final *Outcome
	// delivered, for a stateless run whose outcome a request delivers
	// (runs/wait, runs/stream without a thread), is closed once it has:
	// the run's thread, record and log are deleted only then.
	delivered chan struct{}
	// followUps: the run's end read its thread's inbox for follow-ups;
	// inboxSeen is the last entry number it read.
	followUps bool
	inboxSeen int64
}

// cancelCause says why a run's context ended.
type cancelCause struct{ action string }

func (c *cancelCause) Error() string { return "run cancelled (" + c.action + ")" }

// errShutdown ends runs when the service stops; they stay running in the
// store for the next process to pick up.
var errShutdown = errors.New("runs: shutting down")

// Record is a copy of the run's record, for readers besides its executor.
func (lr *Run) Record() store.RunRecord {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.rec
}

// Kwargs are the run's parameters.
func (lr *Run) Kwargs() Kwargs {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.data.Kwargs
}

// Done is closed when the run has ended (or, for a queued run this
// process does not run, never: follow it with Outcome or Events).
func (lr *Run) Done() <-chan struct{} { return lr.done }

// Outcome is what join and wait answer once Done is closed.
func (lr *Run) Outcome() *Outcome { return lr.final }

// Deliver tells a stateless run its outcome was delivered (see
// delivered); nothing for other runs.
func (lr *Run) Deliver() {
	if lr.delivered != nil {
		close(lr.delivered)
	}
}

// attempt is the run's attempt.
func (lr *Run) attempt() int {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.data.Attempt
}

// set changes the run's status and data.
func (lr *Run) set(fn func(*store.RunRecord, *Data)) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	fn(&lr.rec, &lr.data)
}

func newRunManager(s *Service) *runManager {
	base, stop := context.WithCancelCause(context.Background())
	return &runManager{s: s, threads: map[string]*threadRuns{}, live: map[string]*Run{}, base: base, stopRuns: stop}
}

func (m *runManager) newLive(rec store.RunRecord, d Data, a Assistant, prior []*Event) *Run {
	ctx, cancel := context.WithCancelCause(m.base)
	return &Run{rec: rec, data: d, a: a, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		log: newEventLog(rec.ID, rec.Thread, d.Attempt, m.s.runlog, m.s.log, m.s.eventBuilder(rec.Thread), prior)}
}

// get returns a run this process has in hand.
func (m *runManager) get(id string) *Run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// submit stores a new run and starts it, or queues it behind the thread's
// run as the multitask strategy says: reject refuses it (409), interrupt
// and rollback cancel the runs ahead of it, enqueue waits.
func (m *runManager) submit(ctx context.Context, lr *Run, strategy string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		lr.log.release()
		return newError(ErrClosed, "the server is shutting down")
	}
	tr := m.threads[lr.rec.Thread]
	if tr == nil {
		tr = &threadRuns{}
		m.threads[lr.rec.Thread] = tr
	}
	if tr.active != nil {
		switch strategy {
		case "reject":
			lr.log.release()
			return newError(ErrBusy, "thread %q is busy with run %s (multitask_strategy reject); wait for it, or ask for enqueue, interrupt or rollback", APIThreadID(lr.rec.Thread), tr.active.rec.ID)
		case "interrupt", "rollback":
			for _, other := range append([]*Run{tr.active}, tr.waiting...) {
				other.cancel(&cancelCause{action: strategy})
			}
		}
	}
	if err := m.put(ctx, lr); err != nil {
		lr.log.release()
		return err
	}
	m.live[lr.rec.ID] = lr
	if tr.active == nil {
		tr.active = lr
		m.start(lr)
	} else {
		tr.waiting = append(tr.waiting, lr)
	}
	return nil
}

// put writes a run's record.
func (m *runManager) put(ctx context.Context, lr *Run) error {
	lr.mu.Lock()
	b, err := json.Marshal(lr.data)
	if err != nil {
		lr.mu.Unlock()
		return err
	}
	lr.rec.Data = b
	lr.rec.UpdatedAt = m.s.cfg.Now().UnixNano()
	rec := lr.rec
	lr.mu.Unlock()
	return m.s.runlog.PutRun(context.WithoutCancel(ctx), rec)
}

func (m *runManager) start(lr *Run) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.s.waitStart(lr.ctx, lr.Record(), lr.data.Kwargs)
		_ = m.executeRetrying(lr) // in this process nobody else writes the thread
		m.finished(lr)
	}()
}

// execute runs lr to its end and records how it ended. A run stopped by
// the service's shutdown, or whose appends were fenced (another worker
// holds its thread's lease now), is left running in the store; execute
// returns the fencing error then.
func (m *runManager) execute(lr *Run) error {
	ctx := lr.ctx
	if err := ctx.Err(); err == nil {
		lr.set(func(r *store.RunRecord, _ *Data) { r.Status = StatusRunning })
		if err := m.put(ctx, lr); err != nil {
			m.s.log.Warn("recording a run failed", "run", lr.rec.ID, "err", err)
		}
	}
	lr.log.append(Inline("metadata", runMetadata(lr.rec.ID, lr.rec.Thread, lr.data.Attempt)))
	res, err := m.run(ctx, lr)
	if errors.Is(context.Cause(ctx), errShutdown) || errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrUnavailable) {
		lr.log.close()
		if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrUnavailable) {
			return err
		}
		return nil // still running in the store: the next Start (or worker) resumes it
	}
	m.conclude(ctx, lr, res, err)
	lr.log.close() // every event stored before the record says the run ended
	if st := lr.Record().Status; st == StatusSuccess || st == StatusError {
		// Before the record says the run ended: a crash in between leaves
		// the run running, and the process that resumes it starts them.
		lr.inboxSeen = m.s.startFollowUps(context.WithoutCancel(ctx), lr.rec.Tenant, lr.rec.Thread, lr.data.AssistantID, lr.rec.ID)
		lr.followUps = true
	}
	hook, ok := m.s.outbox.keep(ctx, lr) // and its webhook kept before: a crash in between still delivers it
	if err := m.put(ctx, lr); err != nil {
		m.s.log.Warn("recording a run failed", "run", lr.rec.ID, "err", err)
	}
	if ok {
		m.s.outbox.deliver(hook)
	}
	return nil
}

// followUpsLate, once lr's thread is idle, starts a run of the entries
// sent after lr's end read its inbox (Service.followUpsLate).
func (m *runManager) followUpsLate(lr *Run) {
	if lr.followUps {
		m.s.followUpsLate(context.Background(), lr.rec.Tenant, lr.rec.Thread, lr.data.AssistantID, lr.inboxSeen)
	}
}

// storeRetry spaces the attempts of a run whose store went away.
var storeRetry = backoff.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second}

// executeRetrying executes a run, and again from its last checkpoint
// while the store is unavailable (a database restarting): the run waits
// and continues rather than fail. It returns the last attempt's error.
func (m *runManager) executeRetrying(lr *Run) error {
	for n := 1; ; n++ {
		err := m.execute(lr)
		if !errors.Is(err, store.ErrUnavailable) || lr.ctx.Err() != nil {
			return err
		}
		d := storeRetry.Delay(n, 0)
		m.s.log.Warn("store unavailable during a run; it goes on from its last checkpoint", "run", lr.rec.ID, "retry_in", d, "err", err)
		if backoff.Sleep(lr.ctx, d) != nil {
			return err
		}
		started, serr := m.runStarted(lr.ctx, lr.Record())
		if serr != nil {
			continue // still unavailable: the next attempt tells
		}
		lr.started = lr.started || started
		lr.set(func(_ *store.RunRecord, d *Data) { d.Attempt++ })
		lr.log.reopen(lr.attempt())
	}
}

// run calls the assistant, turning its events into the run's log.
func (m *runManager) run(ctx context.Context, lr *Run) (flow.Result, error) {
	if ctx.Err() != nil {
		return flow.Result{}, context.Cause(ctx)
	}
	spec, err := m.spec(ctx, lr)
	if err != nil {
		return flow.Result{}, err
	}
	conv := newConverter(m.s, lr.rec.Thread, lr.rec.ID, lr.data.Kwargs.StreamMode, lr.data.Kwargs.StreamSubgraphs)
	conv.redact = !lr.a.Info().RedactsState
	conv.durable = lr.data.Kwargs.Durability == "" || lr.data.Kwargs.Durability == "sync"
	pass, err := spec.Stream.Filter("")
	if err != nil {
		return flow.Result{}, err
	}
	if spec.Resume {
		m.resumedFrom(ctx, lr, conv)
	}
	var mu sync.Mutex
	spec.Observer = func(ev flow.Event) {
		if !pass(ev) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range conv.convert(ctx, ev) {
			if e.ref == nil {
				e.data = m.s.redact.JSON(e.data)
			}
			lr.log.append(e)
		}
	}
	return lr.a.Run(withRunConfig(ctx, lr.data.Kwargs), spec)
}

// withRunConfig gives the run's nodes its config.configurable and its
// context (flow.RunConfigOf).
func withRunConfig(ctx context.Context, k Kwargs) context.Context {
	rc := flow.RunConfig{Context: k.Context}
	if k.Config != nil {
		rc.Configurable = k.Config.Configurable
	}
	if rc.Configurable == nil && IsNull(rc.Context) {
		return ctx
	}
	return flow.WithRunConfig(ctx, rc)
}

// conclude sets the run's status and final outcome and writes its last
// events: an interrupt, or the error.
func (m *runManager) conclude(ctx context.Context, lr *Run, res flow.Result, err error) {
	var cc *cancelCause
	status, reason, errText, errKind := StatusSuccess, "", "", ""
	switch {
	case errors.As(context.Cause(ctx), &cc):
		status, reason = StatusInterrupted, cc.action
	case err != nil:
		errKind, errText = errorOf(err)
		status, errText = StatusError, APIText(lr.rec.Thread, m.s.redact.String(errText))
		lr.log.append(Inline("error", raw(map[string]string{"error": errKind, "message": errText})))
	case res.StopReason == state.StopRecursionLimit:
		errKind, errText = recursionError(res.Progress.Steps)
		status = StatusError
		m.recordLimit(ctx, lr, errKind+": "+errText)
		lr.log.append(Inline("error", raw(map[string]string{"error": errKind, "message": errText})))
	case res.StopReason == state.StopInterrupt:
		status = StatusInterrupted
	}
	lr.set(func(r *store.RunRecord, d *Data) {
		r.Status = status
		d.StopReason, d.CancelReason, d.Error, d.ErrorType = string(res.StopReason), reason, errText, errKind
	})
	if status != StatusError && slices.Contains(lr.data.Kwargs.StreamMode, "events") {
		lr.log.append(graphEnd(lr.rec.Thread, lr.rec.ID))
	}
	lr.final = m.finalValues(context.WithoutCancel(ctx), lr)
	if status == StatusInterrupted && reason == "" && slices.Contains(lr.data.Kwargs.StreamMode, "values") {
		lr.log.append(Inline("values", m.s.redact.JSON(pauseValues(lr.final.head))))
	}
}

// finalValues is what join and wait answer: the thread's state, with its
// pending interrupt as __interrupt__, or the run's error as __error__.
func (m *runManager) finalValues(ctx context.Context, lr *Run) *Outcome {
	if lr.rec.Status == StatusError {
		return &Outcome{fixed: raw(map[string]any{"__error__": map[string]string{"error": lr.data.ErrorType, "message": lr.data.Error}})}
	}
	head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread})
	if err != nil {
		return &Outcome{fixed: json.RawMessage("{}")}
	}
	o := &Outcome{head: head}
	if InterruptOf(head) != nil {
		o.fixed = FinalOf(head)
	}
	return o
}

// Outcome is a run's outcome as join and wait answer it: the state of the
// thread's head when it ended, encoded only for whoever asks, a piece at a
// time (a long thread's state is never held twice, as a document and as
// one text); or a fixed answer (an error, a pause's state with its
// interrupt).
type Outcome struct {
	head  store.Checkpoint
	fixed json.RawMessage
}

// write writes the outcome to w.
func (o *Outcome) write(w io.Writer) error {
	if o.fixed != nil {
		_, err := w.Write(o.fixed)
		return err
	}
	_, err := o.head.State.WriteJSON(w)
	return err
}

// finished hands the thread to its next waiting run, undoes a rolled
// back run, and deletes a stateless run's thread.
func (m *runManager) finished(lr *Run) {
	ctx := context.Background()
	var cc *cancelCause
	if errors.As(context.Cause(lr.ctx), &cc) && cc.action == "rollback" {
		if err := m.rollback(ctx, lr); err != nil {
			m.s.log.Warn("rolling back a run failed", "run", lr.rec.ID, "err", err)
		}
	}
	if idle := m.handOver(lr); idle && lr.data.Temporary {
		m.dropTemporary(lr)
	} else if idle {
		m.followUpsLate(lr)
	}
	if lr.Record().Status == StatusInterrupted && m.s.bounded() {
		if th, err := m.s.store.Thread(ctx, lr.rec.Thread); err == nil {
			m.s.expiries.watch(ctx, th)
		}
	}
	lr.log.release()
	close(lr.done)
}

// dropTemporary deletes a stateless run's thread (with its record and
// log) once its outcome is delivered: at once for a background run,
// after the request that delivers it is done for the others.
func (m *runManager) dropTemporary(lr *Run) {
	drop := func() {
		m.s.cronSettled(context.Background(), lr.rec.ID, lr.data)
		if err := m.s.store.DeleteThread(context.Background(), lr.rec.Thread); err != nil && !errors.Is(err, store.ErrNotFound) {
			m.s.log.Warn("deleting a stateless run's thread failed", "thread", lr.rec.Thread, "err", err)
		}
	}
	if lr.delivered == nil {
		drop()
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-lr.delivered:
		case <-m.base.Done():
		}
		drop()
	}()
}

// handOver lets go of lr's thread: its next waiting run starts. It
// reports whether the thread is left with no run.
func (m *runManager) handOver(lr *Run) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.live, lr.rec.ID)
	tr := m.threads[lr.rec.Thread]
	if tr == nil || tr.active != lr {
		return false
	}
	tr.active = nil
	if len(tr.waiting) > 0 && !m.closed {
		tr.active, tr.waiting = tr.waiting[0], tr.waiting[1:]
		m.start(tr.active)
		return false
	}
	delete(m.threads, lr.rec.Thread)
	return !m.closed
}

// rollback deletes a run and returns its thread to the state it had
// before the run: a new branch from that checkpoint (the past is kept),
// or, for a thread that was empty, an empty thread again.
func (m *runManager) rollback(ctx context.Context, lr *Run) error {
	if err := m.s.runlog.DeleteRun(ctx, lr.rec.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	th, err := m.s.store.Thread(ctx, lr.rec.Thread)
	if err != nil || th.Head == lr.data.FromSeq {
		return err
	}
	if lr.data.FromSeq == 0 {
		// Emptied in place where the store can: a thread deleted and made
		// again is, for a moment, not found by a client that reads it.
		if em, ok := m.s.store.(interface {
			EmptyThread(context.Context, string) error
		}); ok {
			return em.EmptyThread(ctx, th.ID)
		}
		if err := m.s.store.DeleteThread(ctx, th.ID); err != nil {
			return err
		}
		_, err := m.s.store.CreateThread(ctx, store.Thread{ID: th.ID, Tenant: th.Tenant, Metadata: th.Metadata})
		return err
	}
	at := lr.data.FromSeq
	if cp, err := m.s.store.Load(ctx, store.LoadRequest{Thread: th.ID, Seq: at}); err == nil && (cp.Status == store.StatusFailed || cp.Status == store.StatusInterrupted) {
		at = cp.Meta.StepOf
	}
	_, err = m.s.store.Fork(ctx, store.ForkRequest{Thread: th.ID, At: at, Meta: store.Meta{Source: "rollback"}})
	return err
}

// cancel stops a run (action interrupt or rollback). A run still waiting
// for its thread ends at once.
func (m *runManager) cancel(ctx context.Context, lr *Run, action string) error {
	m.mu.Lock()
	tr := m.threads[lr.rec.Thread]
	waiting := tr != nil && tr.active != lr && slices.Contains(tr.waiting, lr)
	if waiting {
		tr.waiting = slices.DeleteFunc(tr.waiting, func(x *Run) bool { return x == lr })
		delete(m.live, lr.rec.ID)
	}
	m.mu.Unlock()
	lr.cancel(&cancelCause{action: action})
	if !waiting {
		return nil
	}
	lr.set(func(r *store.RunRecord, d *Data) { r.Status, d.CancelReason = StatusInterrupted, action })
	lr.final = m.finalValues(ctx, lr)
	lr.log.release()
	close(lr.done)
	if action == "rollback" {
		return m.s.runlog.DeleteRun(context.WithoutCancel(ctx), lr.rec.ID)
	}
	return m.put(ctx, lr)
}

// recover picks up the runs a previous process left pending or running:
// oldest first, each on its thread's queue.
func (m *runManager) recover(ctx context.Context) error {
	recs, err := m.s.runlog.Runs(ctx, store.RunQuery{Status: []string{StatusPending, StatusRunning}})
	if err != nil {
		return err
	}
	slices.Reverse(recs)
	for _, rec := range recs {
		if err := m.recoverRun(ctx, rec); err != nil {
			return fmt.Errorf("runs: picking up run %s: %w", rec.ID, err)
		}
	}
	return nil
}

func (m *runManager) recoverRun(ctx context.Context, rec store.RunRecord) error {
	d, err := DataOf(rec)
	if err != nil {
		return err
	}
	prior, err := storedEvents(ctx, m.s.runlog, rec.ID, rec.Thread, m.s.RedactsFor(d.Graph()), 0, 0)
	if err != nil {
		return err
	}
	a, ok := m.s.assistants[d.Graph()]
	if !ok {
		d.Error, d.ErrorType = fmt.Sprintf("assistant %q is no longer served", d.AssistantID), "RunError"
		rec.Status = StatusError
		rec.Data = raw(d)
		rec.UpdatedAt = m.s.cfg.Now().UnixNano()
		return m.s.runlog.PutRun(ctx, rec)
	}
	d.Attempt++
	lr := m.newLive(rec, d, a, prior)
	if lr.started, err = m.runStarted(ctx, rec); err != nil {
		return err
	}
	return m.submit(ctx, lr, "enqueue")
}

// runStarted reports whether a run committed a checkpoint: the newest
// checkpoint that names a run names this one.
func (m *runManager) runStarted(ctx context.Context, rec store.RunRecord) (bool, error) {
	for cp, err := range m.s.store.History(ctx, store.HistoryRequest{Thread: rec.Thread}) {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if cp.Meta.RunID != "" {
			return cp.Meta.RunID == rec.ID, nil
		}
	}
	return false, nil
}

// shutdown stops every run (they stay running in the store) and waits.
func (m *runManager) shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stopRuns(errShutdown)
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runs: runs still stopping: %w", ctx.Err())
	case <-time.After(time.Minute):
		return errors.New("runs: runs still stopping after a minute")
	}
}
