package flow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Durability says when steps are committed.
type Durability string

// Durability modes.
const (
	// DurabilitySync commits each step before the next starts (default).
	DurabilitySync Durability = "sync"
	// DurabilityAsync commits steps in the background, in order, while the
	// next step runs; everything is flushed before Invoke or Resume returns.
	// A crash may lose the last steps, never reorder them.
	DurabilityAsync Durability = "async"
	// DurabilityExit commits only when the run stops, as one checkpoint.
	DurabilityExit Durability = "exit"
)

// ParseDurability checks a durability name ("" is sync).
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case "":
		return DurabilitySync, nil
	case DurabilitySync, DurabilityAsync, DurabilityExit:
		return d, nil
	}
	return "", fmt.Errorf("%w: durability %q (sync, async, exit)", store.ErrInvalidArgument, s)
}

// Budget limits a run. Zero fields are unlimited.
//
// A run is an Invoke (or a RunFrom) together with every Resume after a
// crash, a failed step or a budget stop: its steps (a step cut short by
// a crash included), tokens and runtime are counted from the checkpoints
// (store.Meta.Usage), so a run that crashes and is resumed over and over
// still stops at its budget. A Resume that follows an interrupt or an
// UpdateState starts a new run, as do Invoke (a new turn) and RunFrom (a
// fork, whose usage counters carry on from the checkpoint it branches
// from). MaxRuntime counts the time spent running, not the time between a
// crash and its resume.
type Budget struct {
	MaxSteps   int
	MaxRuntime time.Duration
	MaxTokens  int64
}

// Override returns b with the fields set in o replacing b's (a task's
// budget over the runner's default).
func (b Budget) Override(o Budget) Budget {
	if o.MaxSteps != 0 {
		b.MaxSteps = o.MaxSteps
	}
	if o.MaxRuntime != 0 {
		b.MaxRuntime = o.MaxRuntime
	}
	if o.MaxTokens != 0 {
		b.MaxTokens = o.MaxTokens
	}
	return b
}

// StopCriterion is a custom stop rule, checked before every step.
type StopCriterion func(s state.Doc, p Progress) (state.StopReason, bool)

// Progress is what stop criteria and results see of a run.
type Progress struct {
	Steps  int
	Tokens store.Tokens
	Start  time.Time
}

// Options configure a Runner.
type Options struct {
	Durability Durability
	Budget     Budget
	// InterruptBefore and InterruptAfter stop the run before or after a
	// step that runs one of these nodes.
	InterruptBefore, InterruptAfter []string
	StopWhen                        []StopCriterion
	// Observer receives the run's events, one at a time.
	Observer func(Event)
	// Namespace writes the checkpoints under a namespace (subgraphs).
	Namespace string
	// RecursionLimit caps the steps of one run (see Budget for what a run
	// is): 0 means the graph's (Graph.WithRecursionLimit), else
	// DefaultRecursionLimit, unless the state has a QitOS max_steps (which
	// bounds the run already); a negative value means no limit. A run
	// that reaches it stops with stop reason "recursion_limit".
	RecursionLimit int
	Now            func() time.Time
	// Redact, when set, hides secrets before anything is committed or
	// emitted: node updates (before they are applied, so the state in
	// memory is the state stored), inputs, UpdateState updates, errors,
	// interrupt payloads, pending writes, Send inputs, metadata extras,
	// events and the errors runs return. Subgraphs inherit it.
	Redact *redact.Redactor
}

// DefaultRecursionLimit is the step limit of a run when Options and
// RunOptions set none (LangGraph's default recursion limit).
const DefaultRecursionLimit = 25

// Runner executes a compiled graph against a store. It is safe for
// concurrent runs on different threads.
type Runner struct {
	g    *Compiled
	s    store.Store
	opts Options
	obs  sync.Mutex
}

// NewRunner returns a runner.
func NewRunner(g *Compiled, s store.Store, opts Options) (*Runner, error) {
	d, err := ParseDurability(string(opts.Durability))
	if err != nil {
		return nil, err
	}
	opts.Durability = d
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, n := range append(slices.Clone(opts.InterruptBefore), opts.InterruptAfter...) {
		if g.nodes[n] == nil {
			return nil, fmt.Errorf("%w: interrupt on unknown node %q", ErrInvalidGraph, n)
		}
	}
	if err := store.ValidateNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	return &Runner{g: g, s: s, opts: opts}, nil
}

// Result is how a run ended.
type Result struct {
	Thread     string
	Head       int64 // the newest checkpoint
	State      state.Doc
	StopReason state.StopReason
	Progress   Progress
	// Interrupt is the payload when StopReason is "interrupt".
	Interrupt json.RawMessage
	// Next lists the tasks a Resume would run.
	Next []store.Task
}

// RunOptions tune one run.
type RunOptions struct {
	// Budget overrides the runner's budget where set.
	Budget Budget
	// RecursionLimit overrides the runner's when not 0 (negative: none).
	RecursionLimit int
	// ExpectHead, when set, makes Invoke fail with store.ErrConflict unless
	// the namespace's head is still this seq (0: empty) — for callers that
	// looked at the head before deciding to start a run.
	ExpectHead *int64
}

// Invoke applies input to the thread's state as a new input checkpoint and
// runs the graph from START. On an existing thread the state carries over
// (a conversation's next turn).
func (r *Runner) Invoke(ctx context.Context, thread string, input state.Update, ro ...RunOptions) (_ Result, err error) {
	defer func() { err = r.opts.Redact.Error(err) }()
	run, err := r.newRun(ctx, thread, ro)
	if err != nil {
		return Result{}, err
	}
	head, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace})
	switch {
	case err == nil:
		run.head, run.doc = head.Seq, head.State
		run.startUsage(usageOf(head.Meta), usageOf(head.Meta))
	case errors.Is(err, store.ErrNotFound):
	default:
		return Result{}, err
	}
	if len(ro) > 0 && ro[0].ExpectHead != nil && *ro[0].ExpectHead != run.head {
		return Result{}, fmt.Errorf("%w: thread %q namespace %q moved to checkpoint %d (expected %d): another run started", store.ErrConflict, thread, r.opts.Namespace, run.head, *ro[0].ExpectHead)
	}
	doc, patch, err := r.apply(run.doc, input, state.ApplyOptions{NewID: idGen(keyPrefix(run.thread, r.opts.Namespace, run.head+1) + "input")})
	if err != nil {
		return Result{}, fmt.Errorf("flow: input: %w", err)
	}
	next, err := r.g.successors(ctx, START, doc)
	if err != nil {
		return Result{}, err
	}
	run.tasks = r.schedule(next)
	cp := store.Checkpoint{Thread: thread, Namespace: r.opts.Namespace, Parent: run.head, Nodes: []string{START}, Patch: patch, State: doc,
		Meta: r.meta(run, store.Meta{Source: "input"})}
	if parent, ok := Info(ctx); ok {
		setParentTask(&cp.Meta, parent.Key)
	}
	if err := run.commit(ctx, cp); err != nil {
		return Result{}, err
	}
	run.doc = doc
	r.emit(Event{Kind: EventRunStart, RunID: run.id, Thread: thread, Seq: run.head})
	return r.loop(ctx, run)
}

// Resume continues a thread from its head: after a crash, a failed step or
// an interrupt. value answers an interrupt (nil for none).
func (r *Runner) Resume(ctx context.Context, thread string, value any, ro ...RunOptions) (_ Result, err error) {
	defer func() { err = r.opts.Redact.Error(err) }()
	run, err := r.newRun(ctx, thread, ro)
	if err != nil {
		return Result{}, err
	}
	head, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace})
	if errors.Is(err, store.ErrNotFound) {
		return Result{}, fmt.Errorf("%w: %w", ErrNothingToResume, err)
	}
	if err != nil {
		return Result{}, err
	}
	run.head, run.doc = head.Seq, head.State
	run.tasks = tasksOf(head.Meta)
	run.readSeq = head.Seq
	base := usageOf(head.Meta)
	if head.Status != store.StatusInterrupted && head.Meta.StopReason != string(state.StopInterrupt) {
		if base, err = r.runStart(ctx, head); err != nil {
			return Result{}, err
		}
	}
	run.startUsage(usageOf(head.Meta), base)
	if head.Status == store.StatusFailed || head.Status == store.StatusInterrupted {
		run.readSeq = head.Meta.StepOf
	}
	if len(run.tasks) > 0 {
		ws, err := r.s.Writes(ctx, thread, r.opts.Namespace, run.readSeq)
		if err != nil {
			return Result{}, err
		}
		run.countCrashes(head.Seq, ws)
		if head.Status == store.StatusFailed || head.Status == store.StatusInterrupted {
			run.pending = map[string]json.RawMessage{}
			for _, w := range ws {
				if !isAttempt(w.Task) {
					run.pending[w.Task] = w.Update
				}
			}
		}
	}
	if head.Status == store.StatusInterrupted {
		run.skipBefore = true
		if value != nil {
			b, err := json.Marshal(value)
			if err != nil {
				return Result{}, fmt.Errorf("%w: resume value: %v", store.ErrInvalidArgument, err)
			}
			run.resume = b
			var ip struct {
				Node string `json:"node"`
			}
			_ = json.Unmarshal(head.Meta.Interrupt, &ip)
			run.resumeNode = ip.Node
		}
	}
	r.emit(Event{Kind: EventRunStart, RunID: run.id, Thread: thread, Seq: run.head})
	return r.loop(ctx, run)
}

// UpdateState applies an update to the thread's head as if node asNode had
// written it, and schedules what follows asNode. asNode may be START.
func (r *Runner) UpdateState(ctx context.Context, thread string, upd state.Update, asNode string) (_ store.Checkpoint, err error) {
	defer func() { err = r.opts.Redact.Error(err) }()
	if asNode != START && r.g.nodes[asNode] == nil {
		return store.Checkpoint{}, fmt.Errorf("%w: update as unknown node %q", ErrInvalidGraph, asNode)
	}
	head, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace})
	if err != nil {
		return store.Checkpoint{}, err
	}
	doc, patch, err := r.apply(head.State, upd, state.ApplyOptions{NewID: idGen(keyPrefix(thread, r.opts.Namespace, head.Seq+1) + asNode)})
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("flow: update: %w", err)
	}
	next, err := r.g.successors(ctx, asNode, doc)
	if err != nil {
		return store.Checkpoint{}, err
	}
	meta := store.Meta{Source: "update", Usage: head.Meta.Usage}
	setRunStart(&meta, usageOf(head.Meta)) // what runs after an outside update is a new run
	setTasks(&meta, r.schedule(next))
	return r.s.Append(ctx, store.Checkpoint{Thread: thread, Namespace: r.opts.Namespace, Parent: head.Seq, Nodes: []string{asNode}, Patch: patch, State: doc, Meta: meta})
}

// RunFrom replays a thread from an old checkpoint: it forks the thread there
// (a new branch; with patch, a changed state) and runs what was scheduled.
func (r *Runner) RunFrom(ctx context.Context, thread string, seq int64, patch state.Patch, ro ...RunOptions) (_ Result, err error) {
	defer func() { err = r.opts.Redact.Error(err) }()
	patch = r.redactPatch(patch)
	src, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace, Seq: seq})
	if err != nil {
		return Result{}, err
	}
	meta := store.Meta{Source: "fork", Next: src.Meta.Next, Tasks: src.Meta.Tasks}
	if src.Meta.Usage != nil {
		// The branch carries on counting from here, as a new run.
		u := *src.Meta.Usage
		meta.Usage = &u
	}
	setRunStart(&meta, usageOf(src.Meta))
	if src.Status == store.StatusFailed || src.Status == store.StatusInterrupted {
		return Result{}, fmt.Errorf("%w: checkpoint %d is %s; fork from the checkpoint it resumes (%d)", store.ErrInvalidArgument, seq, src.Status, src.Meta.StepOf)
	}
	if _, err := r.s.Fork(ctx, store.ForkRequest{Thread: thread, Namespace: r.opts.Namespace, At: seq, Patch: patch, Nodes: src.Nodes, Meta: meta}); err != nil {
		return Result{}, err
	}
	return r.Resume(ctx, thread, nil, ro...)
}

// run is the state of one Invoke or Resume.
type run struct {
	r          *Runner
	id         string
	thread     string
	budget     Budget
	start      time.Time
	head       int64
	readSeq    int64
	doc        state.Doc
	tasks      []store.Task
	pending    map[string]json.RawMessage // task key → update kept from a failed attempt
	resume     json.RawMessage
	resumeNode string
	skipBefore bool
	idWritten  bool
	limit      int // steps per run; 0: none
	// limitDefault: limit is DefaultRecursionLimit, which yields to a
	// QitOS max_steps in the state (that bounds the loop already).
	limitDefault bool

	// Usage: the namespace's consumption at the head (cumulative over every
	// run), the same at the start of this run, and when this attempt (this
	// Invoke or Resume call) started.
	usage        store.Usage
	base         store.Usage
	attemptStart time.Time
	attemptMS    int64 // usage.RuntimeMS when the attempt started
	// attemptKey, on a Resume, is the marker written before its first step
	// so that a crash in that step counts as a step (countCrashes).
	attemptKey string

	// Durability.
	async *committer
	exit  *store.Checkpoint // exit mode: the accumulated, uncommitted steps
}

func (r *Runner) newRun(ctx context.Context, thread string, ro []RunOptions) (*run, error) {
	if err := store.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	run := &run{r: r, id: hex.EncodeToString(b[:]), thread: thread, budget: r.opts.Budget, start: r.opts.Now(), limit: r.opts.RecursionLimit}
	run.attemptStart = run.start
	if len(ro) > 0 {
		run.budget = run.budget.Override(ro[0].Budget)
		if ro[0].RecursionLimit != 0 {
			run.limit = ro[0].RecursionLimit
		}
	}
	if run.limit == 0 {
		run.limit = r.g.limit
	}
	switch {
	case run.limit == 0:
		run.limit, run.limitDefault = DefaultRecursionLimit, true
	case run.limit < 0:
		run.limit = 0
	}
	if r.opts.Durability == DurabilityAsync {
		run.async = newCommitter(ctx, r.s)
	}
	return run, nil
}

// meta completes a checkpoint's metadata. The run id goes on the first
// checkpoint of a run and on those where it stopped short, which is enough
// to tell runs apart in history without repeating it on every step.
func (r *Runner) meta(run *run, m store.Meta) store.Meta {
	u := run.currentUsage()
	m.Usage = &u
	if !run.idWritten || m.StopReason != "" || (u.Steps-run.base.Steps)%runStartEvery == 0 {
		// Where a resume after a crash finds the run's start quickly.
		setRunStart(&m, run.base)
	}
	if !run.idWritten || m.StopReason != "" {
		m.RunID = run.id
		run.idWritten = true
	}
	if m.Tasks == nil && m.Next == nil {
		setTasks(&m, run.tasks)
	}
	return m
}

// setTasks records scheduled tasks in a checkpoint's metadata.
func setTasks(m *store.Meta, ts []store.Task) {
	m.Next, m.Tasks = nil, nil
	withInput := false
	for _, t := range ts {
		m.Next = append(m.Next, t.Node)
		withInput = withInput || t.Input != nil
	}
	if withInput {
		m.Tasks = ts
	}
}

// tasksOf reads the scheduled tasks back.
func tasksOf(m store.Meta) []store.Task {
	if len(m.Tasks) > 0 {
		return slices.Clone(m.Tasks)
	}
	out := make([]store.Task, len(m.Next))
	for i, n := range m.Next {
		out[i] = store.Task{Node: n}
	}
	return out
}

// dedupe turns targets into tasks: END is dropped, a node scheduled twice
// with the shared state runs once, Sends always run.
func dedupe(ts []Target) []store.Task {
	var out []store.Task
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Node == END {
			continue
		}
		if t.Input == nil {
			if seen[t.Node] {
				continue
			}
			seen[t.Node] = true
		}
		out = append(out, store.Task{Node: t.Node, Input: t.Input})
	}
	return out
}

// commit writes cp as the new head: now in sync mode, in the background in
// async mode. In exit mode successful steps accumulate (run.head counts them
// logically) until the run settles.
func (run *run) commit(ctx context.Context, cp store.Checkpoint) error {
	cp.Parent = run.head
	run.r.redactMeta(&cp.Meta)
	if run.r.opts.Durability == DurabilityExit {
		if cp.Status == 0 || cp.Status == store.StatusSuccess {
			run.accumulate(cp)
			run.head++
			return nil
		}
		if err := run.flushExit(ctx, ""); err != nil {
			return err
		}
		cp.Parent = run.head
	}
	if run.async != nil {
		run.async.put(cp)
		run.head++
		return nil
	}
	out, err := run.r.s.Append(ctx, cp)
	if err != nil {
		return err
	}
	run.head = out.Seq
	return nil
}

// accumulate folds a step into the exit-mode checkpoint.
func (run *run) accumulate(cp store.Checkpoint) {
	if run.exit == nil {
		first := cp
		first.Patch = slices.Clone(cp.Patch)
		first.Nodes = slices.Clone(cp.Nodes)
		run.exit = &first
		return
	}
	acc := run.exit
	acc.Patch = append(acc.Patch, cp.Patch...)
	acc.Nodes = appendNew(acc.Nodes, cp.Nodes...)
	acc.State, acc.Meta.Next, acc.Meta.Tasks, acc.Meta.Usage = cp.State, cp.Meta.Next, cp.Meta.Tasks, cp.Meta.Usage
	if cp.Meta.Tokens != nil {
		acc.Meta.Tokens = addTokens(acc.Meta.Tokens, *cp.Meta.Tokens)
	}
	for k, v := range cp.Meta.Extra {
		if acc.Meta.Extra == nil {
			acc.Meta.Extra = map[string]any{}
		}
		acc.Meta.Extra[k] = v
	}
}

// flushExit writes the accumulated exit-mode steps as one checkpoint.
func (run *run) flushExit(ctx context.Context, reason state.StopReason) error {
	if run.exit == nil {
		return nil
	}
	acc := *run.exit
	run.exit = nil
	acc.Meta.StopReason = string(reason)
	out, err := run.r.s.Append(ctx, acc)
	if err != nil {
		return err
	}
	run.head = out.Seq
	return nil
}

// settle makes everything the run did durable: async commits are waited
// for, exit-mode steps written.
func (run *run) settle(ctx context.Context, reason state.StopReason) error {
	if err := run.flushExit(context.WithoutCancel(ctx), reason); err != nil {
		return err
	}
	if run.async != nil {
		return run.async.flush()
	}
	return nil
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

func addTokens(a *store.Tokens, b store.Tokens) *store.Tokens {
	out := store.Tokens{Input: b.Input, Output: b.Output}
	if a != nil {
		out.Input += a.Input
		out.Output += a.Output
	}
	return &out
}

// finish flushes pending commits and builds the result.
func (run *run) finish(ctx context.Context, reason state.StopReason, interrupt json.RawMessage, runErr error) (Result, error) {
	r := run.r
	if err := run.flushExit(context.WithoutCancel(ctx), reason); err != nil && runErr == nil {
		runErr = err
	}
	if run.async != nil {
		if err := run.async.close(); err != nil && runErr == nil {
			runErr = err
		}
	}
	runErr = r.opts.Redact.Error(runErr)
	res := Result{Thread: run.thread, Head: run.head, State: run.doc, StopReason: reason, Interrupt: interrupt, Next: run.tasks,
		Progress: run.progress()}
	ev := Event{Kind: EventRunEnd, RunID: run.id, Thread: run.thread, Seq: run.head, StopReason: reason}
	if runErr != nil {
		ev.Err = runErr.Error()
	}
	r.emit(ev)
	return res, runErr
}

// loop runs steps until the run stops.
func (r *Runner) loop(ctx context.Context, run *run) (Result, error) {
	for {
		if ctx.Err() != nil {
			return run.finish(ctx, state.StopCancelledImmediate, nil, ctx.Err())
		}
		if reason, stop := r.shouldStop(run); stop {
			return run.finish(ctx, reason, nil, nil)
		}
		if !run.skipBefore {
			for _, t := range run.tasks {
				if slices.Contains(r.opts.InterruptBefore, t.Node) {
					if err := run.settle(ctx, ""); err != nil {
						return run.finish(ctx, state.StopUnrecoverableError, nil, err)
					}
					payload, _ := json.Marshal(map[string]string{"before": t.Node, "node": t.Node})
					cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Status: store.StatusInterrupted, State: run.doc,
						Meta: r.meta(run, store.Meta{Source: "interrupt", Interrupt: payload, StepOf: run.readSeqOrHead(), StopReason: string(state.StopInterrupt)})}
					if err := run.commit(ctx, cp); err != nil {
						return run.finish(ctx, state.StopUnrecoverableError, nil, err)
					}
					r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: t.Node, Payload: payload})
					return run.finish(ctx, state.StopInterrupt, payload, nil)
				}
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

func (run *run) readSeqOrHead() int64 {
	if run.readSeq != 0 && run.readSeq != run.head {
		return run.readSeq
	}
	return run.head
}

// shouldStop checks the stop conditions before a step.
func (r *Runner) shouldStop(run *run) (state.StopReason, bool) {
	var final, reason json.RawMessage
	final, _ = run.doc.Raw("final_result")
	reason, _ = run.doc.Raw("stop_reason")
	if reason != nil && string(reason) != "null" {
		var s string
		if json.Unmarshal(reason, &s) == nil {
			if sr, err := state.ParseStopReason(s); err == nil {
				return sr, true
			}
		}
	}
	if final != nil && string(final) != "null" {
		return state.StopFinal, true
	}
	if len(run.tasks) == 0 {
		return state.StopSuccess, true
	}
	var cur, maxSteps int
	if raw, ok := run.doc.Raw("max_steps"); ok && json.Unmarshal(raw, &maxSteps) == nil && maxSteps > 0 {
		if raw, ok := run.doc.Raw("current_step"); ok && json.Unmarshal(raw, &cur) == nil && cur >= maxSteps {
			return state.StopMaxSteps, true
		}
	}
	b := run.budget
	p := run.progress()
	if b.MaxSteps > 0 && p.Steps >= b.MaxSteps {
		return state.StopBudgetSteps, true
	}
	if b.MaxRuntime > 0 && time.Duration(run.currentUsage().RuntimeMS-run.base.RuntimeMS)*time.Millisecond >= b.MaxRuntime {
		return state.StopBudgetTime, true
	}
	if b.MaxTokens > 0 && p.Tokens.Input+p.Tokens.Output >= b.MaxTokens {
		return state.StopBudgetTokens, true
	}
	if run.limit > 0 && p.Steps >= run.limit && !(run.limitDefault && maxSteps > 0) {
		return state.StopRecursionLimit, true
	}
	for _, c := range r.opts.StopWhen {
		if reason, ok := c(run.doc, p); ok {
			return reason, true
		}
	}
	return "", false
}

// taskResult is one task's outcome.
type taskResult struct {
	update   state.Update
	raw      json.RawMessage // the update as JSON: a pending write, or redacted
	pending  bool            // raw comes from a pending write
	err      error
	tokens   tokenCount
	duration time.Duration
	extra    map[string]any // Annotate
}

type stepOutcome struct {
	stop      state.StopReason
	interrupt json.RawMessage
}

// step runs the scheduled tasks and commits their merged update.
func (r *Runner) step(ctx context.Context, run *run) (stepOutcome, error) {
	readSeq := run.readSeqOrHead()
	tasks := run.tasks
	keys := taskKeys(run.thread, r.opts.Namespace, readSeq, tasks)
	r.emit(Event{Kind: EventStepStart, RunID: run.id, Thread: run.thread, Seq: readSeq})
	results := make([]taskResult, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		if raw, ok := run.pending[keys[i]]; ok {
			results[i] = taskResult{raw: raw, pending: true}
			continue
		}
		tk := &task{info: RunInfo{RunID: run.id, Thread: run.thread, Namespace: r.opts.Namespace, ReadSeq: readSeq, Node: t.Node, Index: i, Key: keys[i]}, input: t.Input, runner: r}
		if run.resume != nil && t.Node == run.resumeNode {
			tk.resume = run.resume
		}
		if len(tasks) == 1 {
			results[i] = r.runTask(ctx, run, tk, run.doc)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.runTask(ctx, run, tk, run.doc)
		}()
	}
	wg.Wait()
	run.resume, run.resumeNode = nil, ""

	if ctx.Err() != nil {
		// Nothing of a cancelled step is committed.
		return stepOutcome{stop: state.StopCancelledImmediate}, ctx.Err()
	}
	// Interrupts and failures: keep the finished siblings as pending writes.
	var interrupt *InterruptError
	var failed []error
	var failedNodes []string
	for i, res := range results {
		var ie *InterruptError
		switch {
		case res.err == nil:
		case errors.As(res.err, &ie):
			if interrupt == nil {
				interrupt = ie
			}
		default:
			failed = append(failed, res.err)
			failedNodes = append(failedNodes, tasks[i].Node)
		}
	}
	if conflict := firstConflict(failed); conflict != nil {
		// A nested runner lost a race for its head: another writer owns this
		// thread now, so nothing of this step is committed, not even as FAILED.
		if err := run.settle(ctx, ""); err != nil {
			return stepOutcome{stop: state.StopUnrecoverableError}, errors.Join(conflict, err)
		}
		r.emit(Event{Kind: EventError, RunID: run.id, Thread: run.thread, Seq: run.head, Err: conflict.Error()})
		return stepOutcome{stop: state.StopUnrecoverableError}, conflict
	}
	if interrupt != nil || len(failed) > 0 {
		if err := run.settle(ctx, ""); err != nil {
			return stepOutcome{stop: state.StopUnrecoverableError}, err
		}
		if r.opts.Durability == DurabilityExit {
			// The accumulated steps are now one checkpoint: key the kept
			// writes by it, as a resume will.
			readSeq = run.head
			keys = taskKeys(run.thread, r.opts.Namespace, readSeq, tasks)
		}
		var ws []store.Write
		for i, res := range results {
			if res.err != nil || res.pending {
				continue
			}
			b, err := json.Marshal(res.update)
			if res.raw != nil {
				b, err = res.raw, nil
			}
			if err != nil {
				return stepOutcome{stop: state.StopUnrecoverableError}, fmt.Errorf("flow: node %q update: %w", tasks[i].Node, err)
			}
			ws = append(ws, store.Write{Task: keys[i], Node: tasks[i].Node, Update: b})
		}
		if len(ws) > 0 {
			if err := r.s.PutWrites(ctx, run.thread, r.opts.Namespace, readSeq, ws); err != nil {
				return stepOutcome{stop: state.StopUnrecoverableError}, err
			}
		}
		cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, State: run.doc}
		if interrupt != nil && len(failed) == 0 {
			if r.opts.Redact != nil {
				interrupt.Payload = r.opts.Redact.JSON(interrupt.Payload)
			}
			payload, _ := json.Marshal(map[string]json.RawMessage{"node": mustJSON(interrupt.Node), "value": interrupt.Payload})
			cp.Status, cp.Nodes = store.StatusInterrupted, []string{interrupt.Node}
			cp.Meta = r.meta(run, store.Meta{Source: "interrupt", Interrupt: payload, StepOf: readSeq, StopReason: string(state.StopInterrupt)})
			if err := run.commit(ctx, cp); err != nil {
				return stepOutcome{stop: state.StopUnrecoverableError}, err
			}
			run.readSeq = readSeq
			r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: interrupt.Node, Payload: interrupt.Payload})
			return stepOutcome{stop: state.StopInterrupt, interrupt: interrupt.Payload}, nil
		}
		err := errors.Join(failed...)
		// A failed step ran: it counts against the run's budget.
		run.usage.Steps++
		for _, res := range results {
			run.usage.Tokens.Input += res.tokens.in
			run.usage.Tokens.Output += res.tokens.out
		}
		reason := failureReason(failed)
		cp.Status, cp.Nodes = store.StatusFailed, failedNodes
		cp.Meta = r.meta(run, store.Meta{Source: "step", Error: err.Error(), StepOf: readSeq, StopReason: string(reason), Extra: annotations(results)})
		if cerr := run.commit(context.WithoutCancel(ctx), cp); cerr != nil {
			err = errors.Join(err, cerr)
		}
		run.readSeq = readSeq
		r.emit(Event{Kind: EventError, RunID: run.id, Thread: run.thread, Seq: run.head, Err: err.Error()})
		return stepOutcome{stop: reason}, err
	}

	// Merge the updates in task order.
	doc := run.doc
	var patch state.Patch
	var stepTokens store.Tokens
	durations := map[string]float64{}
	nodes := make([]string, 0, len(tasks))
	for i, res := range results {
		var err error
		var p state.Patch
		opts := state.ApplyOptions{NewID: idGen(keys[i])}
		if res.raw != nil {
			var m map[string]json.RawMessage
			if err = json.Unmarshal(res.raw, &m); err == nil {
				doc, p, err = r.g.schema.ApplyJSON(doc, m, opts)
			}
		} else {
			doc, p, err = r.g.schema.Apply(doc, res.update, opts)
		}
		if err != nil {
			ne := &NodeError{Node: tasks[i].Node, Key: keys[i], Attempts: 1, Err: err}
			cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Status: store.StatusFailed, State: run.doc, Nodes: []string{tasks[i].Node},
				Meta: r.meta(run, store.Meta{Source: "step", Error: ne.Error(), StepOf: readSeq, StopReason: string(state.StopUnrecoverableError)})}
			if cerr := run.commit(ctx, cp); cerr != nil {
				return stepOutcome{stop: state.StopUnrecoverableError}, errors.Join(ne, cerr)
			}
			run.readSeq = readSeq
			return stepOutcome{stop: state.StopUnrecoverableError}, ne
		}
		patch = append(patch, p...)
		stepTokens.Input += res.tokens.in
		stepTokens.Output += res.tokens.out
		durations[tasks[i].Node] += float64(res.duration.Microseconds()) / 1000
		nodes = append(nodes, tasks[i].Node)
	}
	// The QitOS step counter: a state with current_step counts steps, unless
	// a node set it itself.
	if raw, ok := doc.Raw("current_step"); ok && !touches(patch, "/current_step") {
		var cur int64
		if err := json.Unmarshal(raw, &cur); err == nil {
			op := state.Op{Op: state.OpReplace, Path: "/current_step", Value: json.RawMessage(strconv.FormatInt(cur+1, 10))}
			if nd, err := doc.Apply(state.Patch{op}); err == nil {
				doc, patch = nd, append(patch, op)
			}
		}
	}
	// What runs next.
	var next []Target
	for _, t := range tasks {
		ts, err := r.g.successors(ctx, t.Node, doc)
		if err != nil {
			return stepOutcome{stop: state.StopUnrecoverableError}, err
		}
		next = append(next, ts...)
	}
	run.tasks = r.schedule(next)
	var meta store.Meta // Source "" is an ordinary step
	meta.Extra = annotations(results)
	if stepTokens != (store.Tokens{}) {
		meta.Tokens = &stepTokens
	}
	if len(tasks) > 1 || results[0].duration > time.Millisecond {
		meta.DurationMS = durations
	}
	run.usage.Steps++
	run.usage.Tokens.Input += stepTokens.Input
	run.usage.Tokens.Output += stepTokens.Output
	after := ""
	if len(r.opts.InterruptAfter) > 0 && len(run.tasks) > 0 {
		for _, n := range nodes {
			if slices.Contains(r.opts.InterruptAfter, n) {
				after = n
				meta.StopReason = string(state.StopInterrupt)
				break
			}
		}
	}
	cp := store.Checkpoint{Thread: run.thread, Namespace: r.opts.Namespace, Nodes: nodes, Patch: patch, State: doc, Meta: r.meta(run, meta)}
	if err := run.commit(ctx, cp); err != nil {
		return stepOutcome{stop: state.StopUnrecoverableError}, err
	}
	run.doc, run.readSeq, run.pending = doc, 0, nil
	if r.opts.Observer != nil {
		pj, _ := json.Marshal(patch) // patches of compact JSON always marshal
		seq := run.head
		if r.opts.Durability == DurabilityExit {
			seq = 0 // folded into the run's one checkpoint, written when it stops
		}
		r.emit(Event{Kind: EventStepEnd, RunID: run.id, Thread: run.thread, Seq: seq, Nodes: nodes, Tokens: stepTokens, Payload: pj})
		if stepTokens != (store.Tokens{}) {
			r.emit(Event{Kind: EventTokens, RunID: run.id, Thread: run.thread, Seq: seq, Tokens: stepTokens})
		}
	}
	if after != "" {
		payload, _ := json.Marshal(map[string]string{"after": after, "node": after})
		r.emit(Event{Kind: EventInterrupt, RunID: run.id, Thread: run.thread, Seq: run.head, Node: after, Payload: payload})
		return stepOutcome{stop: state.StopInterrupt, interrupt: payload}, nil
	}
	return stepOutcome{}, nil
}

// StopReasoner is an error that says why a run stops when a node fails
// with it (agent.ProviderError: "context_overflow" for a prompt over the
// model's context window). Other failures stop with unrecoverable_error.
type StopReasoner interface {
	error
	StopReason() state.StopReason
}

// failureReason is the stop reason of a step whose tasks failed: the first
// valid reason a failure names, else unrecoverable_error.
func failureReason(failed []error) state.StopReason {
	for _, err := range failed {
		var sr StopReasoner
		if errors.As(err, &sr) && sr.StopReason().Valid() {
			return sr.StopReason()
		}
	}
	return state.StopUnrecoverableError
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

// firstConflict returns the first node error that is a store conflict.
func firstConflict(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // strings always marshal
	return b
}

// touches reports whether the patch writes path or below it.
func touches(p state.Patch, path string) bool {
	for _, op := range p {
		if op.Path == path || strings.HasPrefix(op.Path, path+"/") {
			return true
		}
	}
	return false
}

// taskKeys returns the idempotency keys of a step's tasks:
// "thread/seq/node" in the root namespace, "thread/ns/seq/node" in others.
func taskKeys(thread, ns string, readSeq int64, tasks []store.Task) []string {
	count := map[string]int{}
	for _, t := range tasks {
		count[t.Node]++
	}
	keys := make([]string, len(tasks))
	seen := map[string]int{}
	prefix := keyPrefix(thread, ns, readSeq)
	for i, t := range tasks {
		k := prefix + t.Node
		if count[t.Node] > 1 {
			k += "#" + strconv.Itoa(seen[t.Node])
			seen[t.Node]++
		}
		keys[i] = k
	}
	return keys
}

// keyPrefix is "thread/seq/", or "thread/ns/seq/" in a namespace.
func keyPrefix(thread, ns string, seq int64) string {
	if ns != "" {
		return thread + "/" + ns + "/" + strconv.FormatInt(seq, 10) + "/"
	}
	return thread + "/" + strconv.FormatInt(seq, 10) + "/"
}

// idGen returns a deterministic message-id generator for one task.
func idGen(key string) func() string {
	n := 0
	return func() string {
		n++
		return key + "/" + strconv.Itoa(n)
	}
}

// runTask runs one node with its retry policy.
func (r *Runner) runTask(ctx context.Context, run *run, tk *task, doc state.Doc) taskResult {
	n := r.g.nodes[tk.info.Node]
	if n == nil {
		return taskResult{err: &NodeError{Node: tk.info.Node, Key: tk.info.Key, Err: fmt.Errorf("%w: no node %q", ErrInvalidGraph, tk.info.Node)}}
	}
	p := n.retry
	attempts := max(p.Attempts, 1)
	backoff := p.Initial
	if backoff <= 0 {
		backoff = 100 * time.Millisecond
	}
	maxBackoff := p.Max
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	start := time.Now()
	var err error
	for a := 1; a <= attempts; a++ {
		tk.info.Attempt = a
		r.emit(Event{Kind: EventNodeStart, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Attempt: a})
		var upd state.Update
		upd, err = callNode(withTask(ctx, tk), n.fn, doc)
		ev := Event{Kind: EventNodeEnd, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Attempt: a, Duration: time.Since(start)}
		if err != nil {
			ev.Err = err.Error()
		}
		r.emit(ev)
		if err == nil {
			res := taskResult{update: upd, tokens: tk.tokens, duration: time.Since(start), extra: tk.extra}
			if r.opts.Redact != nil {
				// Redacted before anything sees it; an update that does not
				// encode stays as it is and fails when applied.
				if raw, ok := r.redactUpdate(upd); ok {
					res.raw, res.update = raw, nil
				}
			}
			if r.opts.Observer != nil {
				b := res.raw
				if b == nil {
					b, _ = json.Marshal(upd)
				}
				if b != nil {
					r.emit(Event{Kind: EventUpdate, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Payload: b})
				}
			}
			return res
		}
		if errors.Is(err, ErrInterrupted) || ctx.Err() != nil || a == attempts || (p.Retryable != nil && !p.Retryable(err)) {
			break
		}
		// Full jitter: sleep a random duration up to the backoff.
		sleep := time.Duration(mrand.Int64N(int64(backoff)) + 1)
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return taskResult{err: ctx.Err()}
		}
		backoff = min(backoff*2, maxBackoff)
	}
	if errors.Is(err, ErrInterrupted) {
		return taskResult{err: err, tokens: tk.tokens}
	}
	return taskResult{err: &NodeError{Node: tk.info.Node, Key: tk.info.Key, Attempts: tk.info.Attempt, Err: err}, tokens: tk.tokens, extra: tk.extra}
}

// callNode runs a node, turning a panic into an error.
func callNode(ctx context.Context, fn NodeFunc, doc state.Doc) (upd state.Update, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(ctx, doc)
}
