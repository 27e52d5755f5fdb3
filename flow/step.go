package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// loop runs steps until the run stops.
func (r *Runner) loop(ctx context.Context, run *run) (Result, error) {
	for {
		if ctx.Err() != nil {
			return run.finish(ctx, state.StopCancelledImmediate, nil, ctx.Err())
		}
		if reason, stop, own := r.shouldStop(run); stop {
			return r.stop(ctx, run, reason, own)
		}
		if !run.skipBefore {
			if node, ok := r.interruptsBefore(run.tasks); ok {
				return r.interruptBefore(ctx, run, node)
			}
		}
		run.skipBefore = false
		if err := run.markAttempt(ctx); err != nil {
			return run.finish(ctx, state.StopUnrecoverableError, nil, err)
		}
		res, err := r.step(ctx, run)
		if err != nil || res.stop != "" {
			return run.finish(ctx, res.stop, res.interrupt, err)
		}
	}
}

// interruptsBefore returns the first scheduled node the run must stop
// before (Options.InterruptBefore).
func (r *Runner) interruptsBefore(tasks []store.Task) (string, bool) {
	for _, t := range tasks {
		if slices.Contains(r.opts.InterruptBefore, t.Node) {
			return t.Node, true
		}
	}
	return "", false
}

// interruptBefore stops the run before node runs, with an INTERRUPTED
// checkpoint that a Resume continues from: a run whose head did not say
// so already (a resume after a crash, or of a run without the pause).
func (r *Runner) interruptBefore(ctx context.Context, run *run, node string) (Result, error) {
	if err := run.settle(ctx, ""); err != nil {
		return run.finish(ctx, state.StopUnrecoverableError, nil, err)
	}
	payload := r.staticPayload("before", node, nil)
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Status: store.StatusInterrupted, State: run.doc,
		Meta: r.meta(run, store.Meta{Source: "interrupt", Interrupt: payload, StepOf: run.readSeqOrHead(), StopReason: string(state.StopInterrupt)})}
	if err := run.commit(ctx, cp); err != nil {
		return run.finish(ctx, state.StopUnrecoverableError, nil, err)
	}
	r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: node, Payload: payload, Static: true})
	return run.finish(ctx, state.StopInterrupt, payload, nil)
}

func (run *run) readSeqOrHead() int64 {
	if run.readSeq != 0 && run.readSeq != run.head {
		return run.readSeq
	}
	return run.head
}

// stepOutcome is how a step ended: a stop reason ("" to go on) and the
// interrupt payload when it stopped for one.
type stepOutcome struct {
	stop      state.StopReason
	interrupt json.RawMessage
}

// stepPlan is what a step runs: the checkpoint its tasks read, the tasks
// and their idempotency keys.
type stepPlan struct {
	start   time.Time
	readSeq int64
	tasks   []store.Task
	keys    []string
	// steer: what the step took from the thread's inbox; its doc is the
	// state the tasks read; inbox what its tasks take while they run
	// (TakeSteers).
	steer steered
	inbox *stepInbox
	// calls: the call records its tasks made, kept for its commit.
	calls *stepCalls
}

// merged is a step's successful outcome before it is committed.
type merged struct {
	doc       state.Doc
	patch     state.Patch
	tokens    store.Tokens
	durations map[string]float64 // ms per node
	nodes     []string
	inbox     int64 // the highest inbox entry the step consumed (0: none)
}

// step runs one step in phases: run the scheduled tasks; settle failures
// and interrupts (committing what must survive them); merge the updates in
// task order and let the rules add theirs; decide what runs next; commit.
func (r *Runner) step(ctx context.Context, run *run) (out stepOutcome, err error) {
	plan := &stepPlan{readSeq: run.readSeqOrHead(), tasks: run.tasks, start: time.Now()}
	ctx, span := r.tracer().Start(ctx, "step", trace.WithAttributes(attribute.Int64("cairn.read_seq", plan.readSeq),
		attribute.String("gen_ai.conversation.id", run.thread)))
	if span.IsRecording() {
		nodes := make([]string, len(plan.tasks))
		for i, t := range plan.tasks {
			nodes[i] = t.Node
		}
		span.SetAttributes(attribute.StringSlice("cairn.nodes", nodes))
	}
	defer func() {
		span.SetAttributes(attribute.Int64("cairn.seq", run.head))
		endWithError(span, r.opts.Redact.Error(err))
	}()
	plan.keys = taskKeys(run.thread, r.opts.Namespace, plan.readSeq, plan.tasks)
	r.emit(Event{Kind: EventStepStart, RunID: run.id, Thread: run.thread, Seq: plan.readSeq})
	if plan.steer, err = r.takeSteers(ctx, run, plan.readSeq); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, err
	}
	plan.inbox = r.newStepInbox(run, plan)
	run.calls = r.stepCalls(run.calls, plan.readSeq)
	plan.calls = run.calls
	results := r.runTasks(ctx, run, plan)
	if ctx.Err() != nil {
		// Nothing of a cancelled step is committed.
		return stepOutcome{stop: state.StopCancelledImmediate}, ctx.Err()
	}
	if out, done, err := r.settleFailures(ctx, run, plan, results); done {
		return out, err
	}
	m, err := r.merge(run, plan, results)
	if err != nil {
		return r.commitMergeFailure(ctx, run, plan, err)
	}
	next, err := r.decideNext(ctx, plan.tasks, m.doc)
	if err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, err
	}
	run.tasks = next
	return r.commitStep(ctx, run, m, results, plan.start)
}

// runTasks runs the step's tasks, in parallel when there are several; a
// task whose update a failed attempt of this step kept is not run again.
func (r *Runner) runTasks(ctx context.Context, run *run, plan *stepPlan) []taskResult {
	results := make([]taskResult, len(plan.tasks))
	var wg sync.WaitGroup
	for i, t := range plan.tasks {
		if raw, ok := run.pending[plan.keys[i]]; ok {
			results[i] = taskResult{raw: raw, pending: true}
			continue
		}
		tk := &task{info: RunInfo{RunID: run.id, Thread: run.thread, Namespace: r.opts.Namespace, ReadSeq: plan.readSeq, Node: t.Node, Index: i, Key: plan.keys[i]}, input: t.Input, runner: r, head: run.head, inbox: plan.inbox, stepCalls: plan.calls}
		if run.resume != nil && t.Node == run.resumeNode {
			tk.resume = run.resume
		}
		if len(plan.tasks) == 1 {
			results[i] = r.runTask(ctx, run, tk, plan.steer.doc)
			continue
		}
		wg.Go(func() { results[i] = r.runTask(ctx, run, tk, plan.steer.doc) })
	}
	wg.Wait()
	run.resume, run.resumeNode = nil, ""
	return results
}

// merge applies the tasks' updates to the state in task order, then the
// rules' additions (Rules.AfterStep).
func (r *Runner) merge(run *run, plan *stepPlan, results []taskResult) (merged, error) {
	m := merged{doc: plan.steer.doc, patch: plan.steer.patch, inbox: plan.steer.upTo, nodes: make([]string, 0, len(plan.tasks))}
	if len(results) > 1 || len(results) == 1 && results[0].duration > time.Millisecond {
		// Only steps of several tasks, or slow ones, record their times.
		m.durations = map[string]float64{}
	}
	for i, res := range results {
		doc, p, err := r.applyResult(m.doc, res, plan.keys[i])
		if err != nil {
			return m, &NodeError{Node: plan.tasks[i].Node, Key: plan.keys[i], Attempts: 1, Err: err}
		}
		if m.doc = doc; m.patch == nil {
			m.patch = p
		} else {
			m.patch = append(m.patch, p...)
		}
		m.tokens.Input += res.tokens.in
		m.tokens.Output += res.tokens.out
		if m.durations != nil {
			m.durations[plan.tasks[i].Node] += float64(res.duration.Microseconds()) / 1000
		}
		m.nodes = append(m.nodes, plan.tasks[i].Node)
	}
	if plan.inbox != nil {
		m.inbox = max(m.inbox, plan.inbox.taken())
	}
	doc, patch, err := r.afterStep(m.doc, m.patch)
	if err != nil {
		return m, fmt.Errorf("flow: step rules: %w", err)
	}
	m.doc, m.patch = doc, patch
	return m, nil
}

// applyResult applies one task's update: as JSON when it was redacted or
// kept as a pending write, else as the node returned it.
func (r *Runner) applyResult(doc state.Doc, res taskResult, key string) (state.Doc, state.Patch, error) {
	opts := state.ApplyOptions{NewID: idGen(key)}
	if res.raw == nil {
		return r.g.schema.Apply(doc, res.update, opts)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res.raw, &m); err != nil {
		return doc, nil, err
	}
	return r.g.schema.ApplyJSON(doc, m, opts)
}

// commitMergeFailure commits a FAILED checkpoint for an update that could
// not be merged (the state stays as it was).
func (r *Runner) commitMergeFailure(ctx context.Context, run *run, plan *stepPlan, err error) (stepOutcome, error) {
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Status: store.StatusFailed, State: run.doc,
		Meta: r.meta(run, store.Meta{Source: "step", Error: err.Error(), StepOf: plan.readSeq, StopReason: string(state.StopUnrecoverableError)})}
	var ne *NodeError
	if errors.As(err, &ne) {
		cp.Nodes = []string{ne.Node}
	}
	if cerr := run.commit(ctx, cp); cerr != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, errors.Join(err, cerr)
	}
	run.readSeq = plan.readSeq
	return stepOutcome{stop: state.StopUnrecoverableError}, err
}

// decideNext asks every task's edges and router what runs next.
func (r *Runner) decideNext(ctx context.Context, tasks []store.Task, doc state.Doc) ([]store.Task, error) {
	var next []Target
	for _, t := range tasks {
		ts, err := r.g.successors(ctx, t.Node, doc)
		if err != nil {
			return nil, err
		}
		next = append(next, ts...)
	}
	return r.schedule(next), nil
}

// commitStep commits a merged step with the schedule that follows it and
// tells the observer; a node in Options.InterruptAfter stops the run.
func (r *Runner) commitStep(ctx context.Context, run *run, m merged, results []taskResult, stepStart time.Time) (stepOutcome, error) {
	meta := store.Meta{Extra: annotations(results)} // Source "" is an ordinary step
	if m.tokens != (store.Tokens{}) {
		meta.Tokens = &m.tokens
	}
	meta.DurationMS = m.durations
	run.usage.Steps++
	run.usage.Inbox = max(run.usage.Inbox, m.inbox)
	run.usage.Tokens.Input += m.tokens.Input
	run.usage.Tokens.Output += m.tokens.Output
	after := r.interruptAfter(run, m.nodes)
	var before json.RawMessage
	if after != "" {
		meta.StopReason = string(state.StopInterrupt)
		meta.Interrupt = r.staticPayload("after", after, nil)
	} else {
		before = r.pauseBefore(&meta, run.tasks)
	}
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Nodes: m.nodes, Patch: m.patch, State: m.doc, Meta: r.meta(run, meta)}
	if err := run.commit(ctx, cp); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, err
	}
	run.doc, run.readSeq, run.pending = m.doc, 0, nil
	r.m.step.Record(ctx, time.Since(stepStart).Seconds())
	record(ctx, r.m.tokens, m.tokens.Input, r.m.in)
	record(ctx, r.m.tokens, m.tokens.Output, r.m.out)
	if r.opts.Logger.Enabled(ctx, slog.LevelDebug) { // the hot path: no attributes built for nobody
		r.log(ctx, slog.LevelDebug, "step committed", run, slog.Int64("seq", run.head), slog.Any("nodes", m.nodes), slog.Int64("tokens", m.tokens.Input+m.tokens.Output))
	}
	r.emitStep(run, m)
	r.emitValues(run)
	if after != "" {
		payload := meta.Interrupt
		r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: after, Payload: payload, Static: true})
		return stepOutcome{stop: state.StopInterrupt, interrupt: payload}, nil
	}
	if before != nil {
		r.emitPause(run, before)
		return stepOutcome{stop: state.StopInterrupt, interrupt: before}, nil
	}
	return stepOutcome{}, nil
}

// pauseBefore makes a commit whose schedule has a node of
// Options.InterruptBefore the run's pause before it, as an update at a
// pause is (StopReason interrupt, Interrupt {before, node}): the run
// stops with that commit, and writes no checkpoint of its own for the
// pause (LangGraph's thread shows its last step, next the node). It
// returns the pause's payload, nil when nothing pauses.
func (r *Runner) pauseBefore(meta *store.Meta, tasks []store.Task) json.RawMessage {
	node, ok := r.interruptsBefore(tasks)
	if !ok {
		return nil
	}
	payload := r.staticPayload("before", node, nil)
	meta.StopReason, meta.Interrupt = string(state.StopInterrupt), payload
	return payload
}

// emitPause tells the observer the run paused before a node.
func (r *Runner) emitPause(run *run, payload json.RawMessage) {
	var p struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(payload, &p) // pauseBefore's
	r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: p.Node, Payload: payload, Static: true})
}

// interruptAfter returns the first node of the step the run must stop
// after (Options.InterruptAfter), when anything is left to run.
func (r *Runner) interruptAfter(run *run, nodes []string) string {
	if len(r.opts.InterruptAfter) == 0 || len(run.tasks) == 0 {
		return ""
	}
	for _, n := range nodes {
		if slices.Contains(r.opts.InterruptAfter, n) {
			return n
		}
	}
	return ""
}

// emitStep tells the observer a step committed, with its patch and tokens.
func (r *Runner) emitStep(run *run, m merged) {
	if r.opts.Observer == nil {
		return
	}
	pj, _ := json.Marshal(m.patch) // patches of compact JSON always marshal
	seq := run.head
	if r.opts.Durability == DurabilityExit {
		seq = 0 // folded into the run's one checkpoint, written when it stops
	}
	r.emit(Event{Kind: EventStepEnd, RunID: run.id, Thread: run.thread, Seq: seq, Nodes: m.nodes, Tokens: m.tokens, Payload: pj})
	if m.tokens != (store.Tokens{}) {
		r.emit(Event{Kind: EventTokens, RunID: run.id, Thread: run.thread, Seq: seq, Tokens: m.tokens})
	}
}

// annotations merges the tasks' Annotate records in task order.
func annotations(results []taskResult) map[string]any {
	var out map[string]any
	for _, res := range results {
		for k, v := range res.extra {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
	}
	return out
}
