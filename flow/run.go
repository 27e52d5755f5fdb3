package flow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

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
	// approval: the answer a resume was given, recorded with its next
	// commit (the audit trail).
	approval   *Approval
	skipBefore bool
	idWritten  bool
	// fresh: the run was started (Invoke), not resumed.
	fresh bool
	// calls: the running step's call records, committed with its
	// checkpoint (nil: none kept).
	calls *stepCalls
	limit int // steps per run; 0: none
	// limitDefault: limit is DefaultRecursionLimit, which yields to a
	// state that bounds its runs itself (Rules.Bounded).
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

	// redacted counts the node updates a secret was redacted from.
	redacted atomic.Int64

	// recorded is, on a Resume from a checkpoint that records a stop
	// (SourceStop), that stop, until the run writes its first checkpoint;
	// recordedDoc is the state that says it, carry the operations that
	// take it back (run.doc has them applied; see stops.go).
	recorded    state.StopReason
	recordedDoc state.Doc
	carry       state.Patch

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
		if id := ro[0].RunID; id != "" {
			if err := store.ValidateThreadID(id); err != nil {
				return nil, fmt.Errorf("flow: run id: %w", err)
			}
			run.id = id
		}
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
// checkpoint of a run, on those where it stopped short, and every
// runStartEvery steps, which is enough to tell which run wrote a step
// (RunOfCheckpoint walks back at most that far) without repeating it on
// every step.
func (r *Runner) meta(run *run, m store.Meta) store.Meta {
	u := run.currentUsage()
	m.Usage = &u
	mark := !run.idWritten || m.StopReason != "" || (u.Steps-run.base.Steps)%runStartEvery == 0
	if mark {
		// Where a resume after a crash finds the run's start quickly.
		setRunStart(&m, run.base)
	}
	if mark {
		m.RunID = run.id
		run.idWritten = true
	}
	if run.approval != nil {
		if m.Extra == nil {
			m.Extra = map[string]any{}
		}
		m.Extra[ApprovalKey] = *run.approval
		run.approval = nil
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
	run.withCarry(&cp)
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
		run.r.emitCheckpoint(run, cp, false)
		return nil
	}
	if run.calls != nil {
		cp.Writes, cp.WritesAt = run.calls.take()
	}
	start := time.Now()
	out, err := run.r.s.Append(ctx, cp)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			run.r.log(ctx, slog.LevelDebug, "commit conflict: another writer moved the head", run, slog.Int64("parent", cp.Parent))
			record(ctx, run.r.m.conflict, 1)
		}
		return err
	}
	run.head = out.Seq
	took := time.Since(start)
	run.r.m.commit.Record(ctx, took.Seconds())
	record(ctx, run.r.m.commits, 1)
	if took > SlowCommit {
		run.r.log(ctx, slog.LevelWarn, "slow commit", run, slog.Int64("seq", out.Seq), slog.Duration("took", took))
	}
	run.r.emitCheckpoint(run, cp, true)
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
	run.r.emitCheckpoint(run, acc, true)
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
	attrs := []slog.Attr{slog.Int64("head", run.head), slog.String("stop_reason", string(reason)), slog.Int("steps", run.progress().Steps)}
	redacted := int(run.redacted.Load())
	if redacted > 0 {
		attrs = append(attrs, slog.Int("redacted_updates", redacted))
	}
	if runErr != nil {
		attrs = append(attrs, slog.String("error", runErr.Error()))
	}
	r.log(ctx, slog.LevelInfo, "run end", run, attrs...)
	res := Result{Thread: run.thread, RunID: run.id, Head: run.head, State: run.doc, StopReason: reason, Interrupt: interrupt, Next: run.tasks,
		Progress: run.progress()}
	ev := Event{Kind: EventRunEnd, RunID: run.id, Thread: run.thread, Seq: run.head, StopReason: reason, Redacted: redacted}
	if runErr != nil {
		ev.Err = runErr.Error()
	}
	r.emit(ev)
	return res, runErr
}
