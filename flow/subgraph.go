package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// SubgraphOptions map state between a parent graph and a child graph.
type SubgraphOptions struct {
	// Input builds the child's input from the parent's state.
	Input func(ctx context.Context, parent state.Doc) (state.Update, error)
	// Output turns the child's final state into the parent's update.
	Output func(ctx context.Context, child state.Doc) (state.Update, error)
	// Budget limits each child run (zero: unlimited).
	Budget Budget
	// RecursionLimit is the child runs' step limit (0: the child graph's,
	// else DefaultRecursionLimit; negative: none). A child that reaches it
	// fails the parent's node with ErrRecursionLimit.
	RecursionLimit int
	// InterruptBefore and InterruptAfter pause the child before or after
	// these of its nodes (LangGraph's compile(interruptBefore) of a
	// subgraph): the pause interrupts the parent, and a resume of the
	// parent goes on in the child.
	InterruptBefore, InterruptAfter []string
}

// Subgraph returns a node that runs child, a graph with its own state
// schema, in the same thread under its own namespace: the parent's
// namespace, then "node:seq" (seq being the checkpoint the parent step
// reads). Each parent step that runs the node starts a fresh child state;
// when the parent step runs again after a crash or an interrupt, the child
// continues from its own last checkpoint, so its completed steps do not run
// again. An interrupt inside the child interrupts the parent; resuming the
// parent with a value resumes the child with it.
func Subgraph(child *Compiled, opts SubgraphOptions) NodeFunc {
	return func(ctx context.Context, parent state.Doc) (state.Update, error) {
		t := taskOf(ctx)
		if t == nil || t.runner == nil {
			return nil, fmt.Errorf("%w: a subgraph node must run inside a runner", ErrInvalidGraph)
		}
		pr := t.runner
		ns := t.info.Node + ":" + strconv.FormatInt(t.info.ReadSeq, 10)
		if t.info.Index > 0 {
			ns += "." + strconv.Itoa(t.info.Index)
		}
		if pr.opts.Namespace != "" {
			ns = pr.opts.Namespace + "/" + ns
		}
		cr, err := NewRunner(child, pr.s, Options{Durability: pr.opts.Durability, Namespace: ns, Budget: opts.Budget, Observer: pr.opts.Observer, Now: pr.opts.Now, Redact: pr.opts.Redact, RecursionLimit: opts.RecursionLimit,
			InterruptBefore: opts.InterruptBefore, InterruptAfter: opts.InterruptAfter, stream: pr.opts.stream, Logger: pr.opts.Logger, TracerProvider: pr.opts.TracerProvider, MeterProvider: pr.opts.MeterProvider, CaptureContent: pr.opts.CaptureContent, Items: pr.opts.Items})
		if err != nil {
			return nil, err
		}
		var res Result
		head, err := pr.s.Load(ctx, store.LoadRequest{Thread: t.info.Thread, Namespace: ns})
		switch {
		case errors.Is(err, store.ErrNotFound):
			var in state.Update
			if opts.Input != nil {
				if in, err = opts.Input(ctx, parent); err != nil {
					return nil, fmt.Errorf("subgraph %q input: %w", t.info.Node, err)
				}
			}
			res, err = cr.Invoke(ctx, t.info.Thread, in)
		case err != nil:
			return nil, err
		case head.Status == store.StatusSuccess && len(head.Meta.Next) == 0:
			res = Result{State: head.State, StopReason: state.StopSuccess}
		default:
			var value any
			if t.resume != nil {
				value = t.resume
			}
			res, err = cr.Resume(ctx, t.info.Thread, value)
		}
		AddTokens(ctx, res.Progress.Tokens.Input, res.Progress.Tokens.Output)
		if err != nil {
			return nil, fmt.Errorf("subgraph %q: %w", t.info.Node, err)
		}
		if res.StopReason == state.StopInterrupt {
			return nil, &InterruptError{Node: t.info.Node, Payload: res.Interrupt, Static: staticPause(res.Interrupt)}
		}
		if res.StopReason == state.StopRecursionLimit {
			return nil, fmt.Errorf("subgraph %q: %w after %d steps", t.info.Node, ErrRecursionLimit, res.Progress.Steps)
		}
		if opts.Output == nil {
			return nil, nil
		}
		out, err := opts.Output(ctx, res.State)
		if err != nil {
			return nil, fmt.Errorf("subgraph %q output: %w", t.info.Node, err)
		}
		return out, nil
	}
}

// staticPause reports whether a run's interrupt payload is a pause before
// or after a node (interruptBefore, interruptAfter: {"before": n, "node":
// n}), not a value a node passed to Interrupt.
func staticPause(p json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return false
	}
	delete(m, "response_schema")
	var node, before, after string
	if len(m) != 2 || json.Unmarshal(m["node"], &node) != nil || node == "" {
		return false
	}
	_ = json.Unmarshal(m["before"], &before)
	_ = json.Unmarshal(m["after"], &after)
	return before == node || after == node
}
