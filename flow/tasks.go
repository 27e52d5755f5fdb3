package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-dev/cairn/internal/backoff"
	"github.com/cairn-dev/cairn/state"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

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

// Node retries back off from 100ms to at most 10s unless the node's
// RetryPolicy says otherwise.
const (
	defaultRetryInitial = 100 * time.Millisecond
	defaultRetryMax     = 10 * time.Second
)

// runTask runs one node with its retry policy.
func (r *Runner) runTask(ctx context.Context, run *run, tk *task, doc state.Doc) taskResult {
	n := r.g.nodes[tk.info.Node]
	if n == nil {
		return taskResult{err: &NodeError{Node: tk.info.Node, Key: tk.info.Key, Err: fmt.Errorf("%w: no node %q", ErrInvalidGraph, tk.info.Node)}}
	}
	p := n.retry
	attempts := max(p.Attempts, 1)
	wait := backoff.Policy{Initial: p.Initial, Max: p.Max}
	if wait.Initial <= 0 {
		wait.Initial = defaultRetryInitial
	}
	if wait.Max <= 0 {
		wait.Max = defaultRetryMax
	}
	start := time.Now()
	var err error
	for a := 1; a <= attempts; a++ {
		tk.info.Attempt = a
		var upd state.Update
		if upd, err = r.attempt(ctx, run, tk, n.fn, doc, start); err == nil {
			return r.succeeded(run, tk, upd, time.Since(start))
		}
		if errors.Is(err, ErrInterrupted) || ctx.Err() != nil || a == attempts || (p.Retryable != nil && !p.Retryable(err)) {
			break
		}
		d := wait.Delay(a, 0)
		record(ctx, r.m.retries, 1, metric.WithAttributes(attribute.String("cairn.node", tk.info.Node)))
		r.log(ctx, slog.LevelDebug, "node retry", run, slog.String("node", tk.info.Node), slog.Int("attempt", a), slog.Duration("wait", d),
			slog.String("error", r.opts.Redact.String(err.Error())))
		if serr := backoff.Sleep(ctx, d); serr != nil {
			return taskResult{err: serr}
		}
	}
	if errors.Is(err, ErrInterrupted) {
		return taskResult{err: err, tokens: tk.tokens}
	}
	return taskResult{err: &NodeError{Node: tk.info.Node, Key: tk.info.Key, Attempts: tk.info.Attempt, Err: err}, tokens: tk.tokens, extra: tk.extra}
}

// attempt calls the node once, between its start and end events.
func (r *Runner) attempt(ctx context.Context, run *run, tk *task, fn NodeFunc, doc state.Doc, start time.Time) (state.Update, error) {
	tk.mu.Lock()
	tk.calls, tk.values = 0, nil // each attempt numbers its calls afresh
	tk.mu.Unlock()
	r.emit(Event{Kind: EventNodeStart, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Attempt: tk.info.Attempt})
	upd, err := callNode(withTask(ctx, tk), fn, doc)
	ev := Event{Kind: EventNodeEnd, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Attempt: tk.info.Attempt, Duration: time.Since(start)}
	if err != nil {
		ev.Err = err.Error()
	}
	r.emit(ev)
	return upd, err
}

// succeeded is the result of a task whose node returned upd: redacted
// before anything sees it, and announced to the observer.
func (r *Runner) succeeded(run *run, tk *task, upd state.Update, took time.Duration) taskResult {
	res := taskResult{update: upd, tokens: tk.tokens, duration: took, extra: tk.extra}
	if r.opts.Redact != nil {
		// An update that does not encode stays as it is and fails when
		// applied.
		if raw, changed, ok := r.redactUpdate(upd); ok {
			res.raw, res.update = raw, nil
			if changed {
				// Counted for the run's end (its event and log line);
				// which node, at info level.
				run.redacted.Add(1)
				r.log(context.Background(), slog.LevelInfo, "secret redacted from a node's update", run, slog.String("node", tk.info.Node))
			}
		}
	}
	if r.opts.Observer != nil {
		b := res.raw
		if b == nil {
			b, _ = json.Marshal(upd)
		}
		if b != nil {
			b = r.g.schema.WithMessageIDs(b, idGen(tk.info.Key)) // as applyResult gives them
			r.emit(Event{Kind: EventUpdate, RunID: run.id, Thread: run.thread, Seq: tk.info.ReadSeq, Node: tk.info.Node, Key: tk.info.Key, Payload: b})
		}
	}
	return res
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
