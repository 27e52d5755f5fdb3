package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// threadRunner is how the configured engine writes a thread: through the
// flow runner, or straight into the store.
func (cfg Config) threadRunner(schema *state.Schema) (threadRunner, error) {
	if cfg.Engine != "runner" {
		return runThreadStore, nil
	}
	g, err := w1Graph(schema, cfg.Steps)
	if err != nil {
		return nil, err
	}
	fd, err := flow.ParseDurability(string(cfg.FlowDurability))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, s store.Store, _ *state.Schema, thread string, steps int, times []time.Duration) error {
		return runThreadFlow(ctx, s, g, flow.Options{Durability: fd, TracerProvider: cfg.TracerProvider}, cfg.Stream, thread, steps, times)
	}, nil
}

// writeThreads writes every thread, one after another or all at once; the
// first thread's step times go to stepTimes.
func writeThreads(ctx context.Context, s store.Store, schema *state.Schema, run threadRunner, steps int, threads []string, concurrent bool, stepTimes []time.Duration) error {
	timesOf := func(i int) []time.Duration {
		if i == 0 {
			return stepTimes
		}
		return nil
	}
	if !concurrent {
		for i, id := range threads {
			if err := run(ctx, s, schema, id, steps, timesOf(i)); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(threads))
	for i, id := range threads {
		wg.Go(func() { errs[i] = run(ctx, s, schema, id, steps, timesOf(i)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// w1Graph is W1's graph: START → step; after step, back to step while
// count < S, else END.
func w1Graph(schema *state.Schema, steps int) (*flow.Compiled, error) {
	g := flow.NewGraph(schema).
		AddNode("step", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var count int
			if err := d.Get("count", &count); err != nil {
				return nil, err
			}
			info, _ := flow.Info(ctx)
			i := count + 1
			c := Content(info.Thread, i)
			return state.Update{
				"messages": state.Message{ID: info.Thread + "-m" + strconv.Itoa(i), Role: "assistant", Content: c},
				"count":    i,
				"last":     c,
			}, nil
		}).
		AddEdge(flow.START, "step").
		AddRouter("step", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var count int
			if err := d.Get("count", &count); err != nil {
				return nil, err
			}
			if count < steps {
				return flow.To("step"), nil
			}
			return flow.To(flow.END), nil
		})
	return g.Compile()
}

// runThreadFlow runs one W1 thread through the flow runner, timing each
// step of thread 0 by the runner's step events.
func runThreadFlow(ctx context.Context, s store.Store, g *flow.Compiled, opts flow.Options, modes []flow.StreamMode, thread string, steps int, times []time.Duration) error {
	opts.RecursionLimit = -1 // W1 runs thousands of steps
	if times != nil {
		// Steps are timed by their commits, not by the runner's events: an
		// observer would make the runner encode every event's payload, work
		// a run without one never does.
		s = &stepClock{Store: s, times: times}
	}
	r, err := flow.NewRunner(g, s, opts)
	if err != nil {
		return err
	}
	input := state.Update{"messages": []state.Message{}, "count": 0, "last": ""}
	var res flow.Result
	if len(modes) > 0 {
		wantState := slices.Contains(modes, flow.StreamValues) || slices.Contains(modes, flow.StreamDebug)
		res, err = consume(r.Stream(ctx, thread, input, flow.StreamOptions{Modes: modes}), wantState)
	} else {
		res, err = r.Invoke(ctx, thread, input)
	}
	if err != nil {
		return fmt.Errorf("thread %s: %w", thread, err)
	}
	if res.StopReason != state.StopSuccess || res.Progress.Steps != steps {
		return fmt.Errorf("thread %s stopped with %s after %d steps", thread, res.StopReason, res.Progress.Steps)
	}
	return nil
}

// consume reads a stream to its end, as a consumer that looks at every
// event would, and returns the run's result.
func consume(events iter.Seq2[flow.Event, error], wantState bool) (flow.Result, error) {
	seen := 0
	for ev, err := range events {
		if err != nil {
			return flow.Result{}, err
		}
		if ev.State != nil && ev.State.Len() > 0 {
			seen++
		}
		if ev.Result != nil {
			if wantState && seen == 0 {
				return *ev.Result, fmt.Errorf("the stream carried no state")
			}
			return *ev.Result, nil
		}
	}
	return flow.Result{}, fmt.Errorf("the stream ended without a result")
}

// stepClock times a run's steps by its commits: step i's time runs from
// the commit before it (the input's, for the first) to its own.
type stepClock struct {
	store.Store
	times []time.Duration
	last  time.Time
	n     int // checkpoints committed
}

func (c *stepClock) Append(ctx context.Context, cp store.Checkpoint) (store.Checkpoint, error) {
	out, err := c.Store.Append(ctx, cp)
	now := time.Now()
	if i := c.n - 1; i >= 0 && i < len(c.times) {
		c.times[i] = now.Sub(c.last)
	}
	c.n++
	c.last = now
	return out, err
}

// runThreadStore runs one W1 thread as a plain loop over the store: the
// input checkpoint, then S steps of the node "step", each committed before
// the next starts.
func runThreadStore(ctx context.Context, s store.Store, schema *state.Schema, thread string, steps int, times []time.Duration) error {
	doc, patch, err := schema.Apply(state.EmptyDoc(), state.Update{"messages": []state.Message{}, "count": 0, "last": ""})
	if err != nil {
		return err
	}
	cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Patch: patch, State: doc, Meta: store.Meta{Source: "input", Next: []string{"step"}}})
	if err != nil {
		return err
	}
	head := cp.Seq
	nodes := []string{"step"}
	next := []string{"step"}
	for count := 0; count < steps; {
		t0 := time.Now()
		// The node: i = count + 1.
		i := count + 1
		c := Content(thread, i)
		upd := state.Update{
			"messages": state.Message{ID: thread + "-m" + strconv.Itoa(i), Role: "assistant", Content: c},
			"count":    i,
			"last":     c,
		}
		nd, patch, err := schema.Apply(doc, upd)
		if err != nil {
			return err
		}
		// The router: back to step while count < S, else END.
		meta := store.Meta{Source: "step", Next: next}
		if i >= steps {
			meta.Next = nil
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Nodes: nodes, Patch: patch, State: nd, Meta: meta})
		if err != nil {
			return fmt.Errorf("thread %s step %d: %w", thread, i, err)
		}
		head, doc, count = cp.Seq, nd, i
		if times != nil {
			times[i-1] = time.Since(t0)
		}
	}
	return nil
}
