package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
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

// Options configure a Runner.
type Options struct {
	Durability Durability
	Budget     Budget
	// InterruptBefore and InterruptAfter stop the run before or after a
	// step that runs one of these nodes.
	InterruptBefore, InterruptAfter []string
	// ResponseSchemas are the JSON Schemas of the answers the pauses
	// before or after these nodes (by node) expect, as WithResponseSchema
	// is a node's Interrupt's; NewRunner refuses one that is not valid
	// (ErrInvalidSchema).
	ResponseSchemas map[string]json.RawMessage
	// StopWhen are stop rules checked before every step, after the
	// runner's own checks.
	StopWhen []StopCriterion
	// Rules extend the runner with the rules of a kind of state, after the
	// graph's own (Graph.WithRules).
	Rules []Rules
	// Observer receives the run's events, one at a time.
	Observer func(Event)
	// Namespace writes the checkpoints under a namespace (subgraphs).
	Namespace string
	// RecursionLimit caps the steps of one run (see Budget for what a run
	// is): 0 means the graph's (Graph.WithRecursionLimit), else
	// DefaultRecursionLimit, unless a rule says the state bounds its runs
	// itself (Rules.Bounded); a negative value means no limit. A run
	// that reaches it stops with stop reason "recursion_limit".
	RecursionLimit int
	Now            func() time.Time
	// Redact, when set, hides secrets before anything is committed or
	// emitted: node updates (before they are applied, so the state in
	// memory is the state stored), inputs, UpdateState updates, errors,
	// interrupt payloads, pending writes, Send inputs, metadata extras,
	// events and the errors runs return. Subgraphs inherit it.
	Redact *redact.Redactor
	// TracerProvider receives the run's spans (OpenTelemetry, GenAI
	// conventions): invoke_workflow per run, step per step (its nodes as
	// cairn.nodes), and, through package agent, chat per model call (with
	// the task's key),
	// execute_tool per tool call, invoke_agent per network agent. Nil: the
	// global provider (a no-op unless the program set one). Subgraphs
	// inherit it.
	TracerProvider trace.TracerProvider
	// MeterProvider receives the runner's metrics: cairn.step.duration and
	// cairn.commit.duration (histograms, seconds), cairn.commits,
	// cairn.conflicts, cairn.retries and gen_ai.client.token.usage
	// (counters). Nil: the global provider (a no-op unless set).
	MeterProvider metric.MeterProvider
	// CaptureContent puts message content on model-call spans
	// (gen_ai.input.messages, gen_ai.output.messages), redacted like
	// everything else; off by default, as the GenAI conventions ask.
	CaptureContent bool
	// Logger receives what a run does: runs starting and ending (info),
	// steps committed, retries and conflicts (debug), secrets redacted
	// from updates and slow commits (warn). Never a state value or a
	// message. Nil: no logging. Subgraphs inherit it.
	Logger *slog.Logger
	// Items is the long-term memory store nodes and tools reach with
	// Items(ctx), scoped to the tenant of the run's thread. Nil: the
	// items of the runner's store (store.ItemsOf, without a semantic
	// index). Subgraphs inherit it.
	Items store.ItemStore
	// Inbox, when set, is the thread inbox (store.InboxOf) the runner
	// reads before each step of the root namespace: the steer entries
	// sent to the thread since its head's Usage.Inbox are added to the
	// state the step's tasks read, through the steering field's reducer
	// (SteerField), and consumed with the step's commit, which records
	// the highest one in its Usage.Inbox (see docs/steering.md).
	Inbox Inbox
	// SteerField names the field steering messages go into; empty: the
	// state's one field of the messages reducer.
	SteerField string
	// SteerBefore, when set, takes steering only before steps that run one
	// of these nodes (a chat's model node: a message between a tool call
	// and its result would break the conversation).
	SteerBefore []string
	// SteerInside names the nodes that take steering themselves while they
	// run (loops calling TakeSteers before each model call, as
	// agent.RunTools does): the runner takes none before a step that runs
	// one, so that a rerun after a crash takes, from the node's journal,
	// the same entries at the same call.
	SteerInside []string

	// stream: the modes a Stream asked for (nil when not streaming);
	// subgraphs inherit it.
	stream *streamModes
}

// DefaultRecursionLimit is the step limit of a run when Options and
// RunOptions set none (LangGraph's default recursion limit).
const DefaultRecursionLimit = 25

// Runner executes a compiled graph against a store. It is safe for
// concurrent runs on different threads.
type Runner struct {
	m    *instruments
	g    *Compiled
	s    store.Store
	opts Options
	obs  sync.Mutex
}

// Schema is the state schema of the runner's graph.
func (r *Runner) Schema() *state.Schema { return r.g.schema }

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
	if opts.Logger == nil {
		opts.Logger = discard
	}
	for _, n := range append(slices.Clone(opts.InterruptBefore), opts.InterruptAfter...) {
		if g.nodes[n] == nil {
			return nil, fmt.Errorf("%w: interrupt on unknown node %q", ErrInvalidGraph, n)
		}
	}
	if err := store.ValidateNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	if opts.ResponseSchemas, err = compileSchemas(g, opts.ResponseSchemas); err != nil {
		return nil, err
	}
	return &Runner{g: g, s: s, opts: opts, m: newInstruments(opts.MeterProvider)}, nil
}

// Result is how a run ended.
type Result struct {
	Thread     string
	RunID      string // the run's id, as its events and checkpoints carry it
	Head       int64  // the newest checkpoint
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
	// RunID names the run (as its events and checkpoints carry it), for a
	// caller that keeps its own record of runs (an HTTP server's run id);
	// empty: a random id. It must be a valid id (store.ValidateThreadID).
	RunID string
	// Extra is recorded in the metadata (store.Meta.Extra) of the input
	// checkpoint Invoke writes: what the caller keeps of the run beside
	// its state (a loop agent's task, for its trace). Redacted like the
	// rest of the metadata; Resume and RunFrom ignore it.
	Extra map[string]any
}

// Invoke applies input to the thread's state as a new input checkpoint and
// runs the graph from START. On an existing thread the state carries over
// (a conversation's next turn).
func (r *Runner) Invoke(ctx context.Context, thread string, input state.Update, ro ...RunOptions) (res Result, err error) {
	ctx, span := r.startRun(ctx, "invoke", thread)
	defer func() { err = r.opts.Redact.Error(err); endSpan(span, res, err) }()
	run, err := r.newRun(ctx, thread, ro)
	if err != nil {
		return Result{}, err
	}
	run.fresh = true
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
	meta := store.Meta{Source: "input", Extra: inputExtra(ro)}
	pause := r.pauseBefore(&meta, run.tasks)
	cp := store.Checkpoint{Thread: thread, Namespace: r.opts.Namespace, Parent: run.head, Nodes: []string{START}, Patch: patch, State: doc,
		Meta: r.meta(run, meta)}
	if parent, ok := Info(ctx); ok {
		setParentTask(&cp.Meta, parent.Key)
	}
	if err := run.commit(ctx, cp); err != nil {
		return Result{}, err
	}
	run.doc = doc
	r.emit(Event{Kind: EventRunStart, RunID: run.id, Thread: thread, Seq: run.head})
	r.log(ctx, slog.LevelInfo, "run start", run, slog.Int64("head", run.head))
	r.emitValues(run)
	if pause != nil {
		r.emitPause(run, pause)
		return run.finish(ctx, state.StopInterrupt, pause, nil)
	}
	return r.loop(ctx, run)
}

// inputExtra is a copy of the Extra of an Invoke's options (nil: none).
func inputExtra(ro []RunOptions) map[string]any {
	if len(ro) == 0 || len(ro[0].Extra) == 0 {
		return nil
	}
	return maps.Clone(ro[0].Extra)
}

// Resume continues a thread from its head: after a crash, a failed step,
// an interrupt or an outside update (UpdateState). value answers an
// interrupt (nil for none). At a pause (an interrupt, a pause before or
// after a step) or an outside update, the first step runs without the
// pauses of Options.InterruptBefore: the person saw what it reads, so the
// pause does not fire again; the steps after it pause as usual. After a
// crash, a cancel or a budget stop the run had not paused, and a pause
// before the next step fires.
func (r *Runner) Resume(ctx context.Context, thread string, value any, ro ...RunOptions) (res Result, err error) {
	ctx, span := r.startRun(ctx, "resume", thread)
	defer func() { err = r.opts.Redact.Error(err); endSpan(span, res, err) }()
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
	if err := r.resumeStopped(run, head); err != nil {
		return Result{}, fmt.Errorf("flow: resume from a recorded stop: %w", err)
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
				if !isAttempt(w.Task) && !isJournal(w.Task) {
					run.pending[w.Task] = w.Update
				}
			}
		}
	}
	run.skipBefore = pauseSeen(head)
	if pausedAt(head) {
		if err := CheckResponse(head, value); err != nil {
			return Result{}, err
		}
		if a, ok := approvalOf(value); ok {
			if done, res, err := r.approve(ctx, run, head, a); done {
				return res, err
			}
		}
	}
	if err := resumeValue(run, head, value); err != nil {
		return Result{}, err
	}
	r.emit(Event{Kind: EventRunStart, RunID: run.id, Thread: thread, Seq: run.head})
	r.log(ctx, slog.LevelInfo, "run resume", run, slog.Int64("head", run.head), slog.String("status", head.Status.String()))
	return r.loop(ctx, run)
}

// pausedAt reports whether a Resume from head answers a pause: an
// INTERRUPTED head, or an update written at a pause (UpdateState).
func pausedAt(head store.Checkpoint) bool {
	return head.Status == store.StatusInterrupted || (head.Meta.StopReason == string(state.StopInterrupt) && len(head.Meta.Interrupt) > 0)
}

// resumeValue gives a Resume's value to the node the pause names: the
// node that asked (its Interrupt returns the value), or the node a pause
// before a step — or an update at a pause — waits for.
func resumeValue(run *run, head store.Checkpoint, value any) error {
	if value == nil || !pausedAt(head) {
		return nil
	}
	var ip struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(head.Meta.Interrupt, &ip)
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%w: resume value: %v", store.ErrInvalidArgument, err)
	}
	run.resume, run.resumeNode = b, ip.Node
	return nil
}

// pauseSeen reports whether a Resume from head runs its first step
// without the pauses of Options.InterruptBefore: when head is where a run
// stopped for a person (an interrupt, a pause before or after a step) or
// an outside update (UpdateState, UpdateStateAt), the person has seen the
// state that step reads — LangGraph's resume, which marks the interrupt
// seen. A run cut short for another reason (a crash, a cancel, a budget)
// had not paused, and pauses.
func pauseSeen(head store.Checkpoint) bool {
	return head.Status == store.StatusInterrupted || head.Meta.StopReason == string(state.StopInterrupt) || head.Meta.Source == sourceUpdate
}

// sourceUpdate is the Meta.Source of the checkpoints UpdateState and
// UpdateStateAt write.
const sourceUpdate = "update"

// UpdateState applies an update to the thread's head as if node asNode had
// written it, and schedules what follows asNode. asNode may be START, or
// INPUT: the update is then a run's input, written as Invoke writes one
// (without running). A Resume then continues from the update: without an
// answer, its first step runs without the pauses of
// Options.InterruptBefore (see Resume) — but after an INPUT, as after
// Invoke's input, they pause.
func (r *Runner) UpdateState(ctx context.Context, thread string, upd state.Update, asNode string) (_ store.Checkpoint, err error) {
	defer func() { err = r.opts.Redact.Error(err) }()
	source := sourceUpdate
	if asNode == INPUT {
		asNode, source = START, "input"
	}
	if asNode != START && r.g.nodes[asNode] == nil {
		return store.Checkpoint{}, fmt.Errorf("%w: update as unknown node %q", ErrInvalidGraph, asNode)
	}
	head, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace})
	if errors.Is(err, store.ErrNotFound) {
		// A thread without checkpoints: the update is its first (a thread
		// made from updates), if the thread exists.
		if _, terr := r.s.Thread(ctx, thread); terr != nil {
			return store.Checkpoint{}, err
		}
		head, err = store.Checkpoint{Thread: thread, Namespace: r.opts.Namespace}, nil
	}
	if err != nil {
		return store.Checkpoint{}, err
	}
	doc, patch, err := r.applyFrom(head, upd, state.ApplyOptions{NewID: idGen(keyPrefix(thread, r.opts.Namespace, head.Seq+1) + asNode)})
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("flow: update: %w", err)
	}
	next, err := r.g.successors(ctx, asNode, doc)
	if err != nil {
		return store.Checkpoint{}, err
	}
	meta := store.Meta{Source: source, Usage: head.Meta.Usage, RunID: updateRunOf(ctx)}
	setRunStart(&meta, usageOf(head.Meta)) // what runs after an outside update is a new run
	setTasks(&meta, r.schedule(next))
	if ts := tasksOf(meta); len(ts) > 0 && source == sourceUpdate && store.ThreadStatusOf(head) == store.ThreadInterrupted {
		// An edit at a pause leaves the thread paused before what is
		// scheduled, as a static pause is, until a resume runs it
		// (LangGraph's thread stays interrupted after update_state).
		meta.StopReason = string(state.StopInterrupt)
		var carried json.RawMessage
		if InterruptNodeOf(head) == ts[0].Node {
			carried = ResponseSchemaOf(head) // the pause's answer is still the one it asked for
		}
		meta.Interrupt = r.staticPayload("before", ts[0].Node, carried)
	}
	return r.s.Append(ctx, store.Checkpoint{Thread: thread, Namespace: r.opts.Namespace, Parent: head.Seq, Nodes: []string{asNode}, Patch: patch, State: doc, Meta: meta})
}

type updateRunKey struct{}

// WithUpdateRun makes the checkpoint UpdateState writes with the returned
// context name run id: an update a run applies before it goes on
// (LangGraph's Command(update=…)), which a resume of that run after a
// crash must find applied.
func WithUpdateRun(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, updateRunKey{}, id)
}

func updateRunOf(ctx context.Context) string {
	id, _ := ctx.Value(updateRunKey{}).(string)
	return id
}

// UpdateStateAt applies an update to the state of checkpoint seq as if
// node asNode had written it, on a new branch: one checkpoint, whose parent
// is seq, becomes the namespace's head and schedules what follows asNode
// (a fork with a change; the past is kept). seq 0 updates the head
// (UpdateState). A FAILED or INTERRUPTED checkpoint is refused as by
// RunFrom.
func (r *Runner) UpdateStateAt(ctx context.Context, thread string, seq int64, upd state.Update, asNode string) (_ store.Checkpoint, err error) {
	if seq == 0 {
		return r.UpdateState(ctx, thread, upd, asNode)
	}
	defer func() { err = r.opts.Redact.Error(err) }()
	source := sourceUpdate
	if asNode == INPUT {
		asNode, source = START, "input"
	}
	if asNode != START && r.g.nodes[asNode] == nil {
		return store.Checkpoint{}, fmt.Errorf("%w: update as unknown node %q", ErrInvalidGraph, asNode)
	}
	src, err := r.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.opts.Namespace, Seq: seq})
	if err != nil {
		return store.Checkpoint{}, err
	}
	if src.Status == store.StatusFailed || src.Status == store.StatusInterrupted {
		return store.Checkpoint{}, fmt.Errorf("%w: checkpoint %d is %s; update the checkpoint it resumes (%d)", store.ErrInvalidArgument, seq, src.Status, src.Meta.StepOf)
	}
	doc, patch, err := r.applyFrom(src, upd, state.ApplyOptions{NewID: idGen(keyPrefix(thread, r.opts.Namespace, seq) + "fork/" + asNode)})
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("flow: update: %w", err)
	}
	next, err := r.g.successors(ctx, asNode, doc)
	if err != nil {
		return store.Checkpoint{}, err
	}
	meta := store.Meta{Source: source}
	if src.Meta.Usage != nil {
		u := *src.Meta.Usage
		meta.Usage = &u
	}
	setRunStart(&meta, usageOf(src.Meta))
	setTasks(&meta, r.schedule(next))
	if meta.Next == nil {
		meta.Next = []string{} // nothing follows: not the schedule of seq
	}
	return r.s.Fork(ctx, store.ForkRequest{Thread: thread, Namespace: r.opts.Namespace, At: seq, Patch: patch, Nodes: []string{asNode}, Meta: meta})
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
	if back := r.takeBack(src); len(back) > 0 {
		patch = append(back, patch...) // the branch is a new run: the stop is that run's
	}
	if _, err := r.s.Fork(ctx, store.ForkRequest{Thread: thread, Namespace: r.opts.Namespace, At: seq, Patch: patch, Nodes: src.Nodes, Meta: meta}); err != nil {
		return Result{}, err
	}
	return r.Resume(ctx, thread, nil, ro...)
}
