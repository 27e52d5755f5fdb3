package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// StreamMode selects what a Stream yields, as LangGraph's stream modes do.
type StreamMode string

// Stream modes.
const (
	// StreamValues: the whole state after each step (and after the input),
	// EventValues with State.
	StreamValues StreamMode = "values"
	// StreamUpdates: each node's update, EventUpdate with Node and Payload.
	StreamUpdates StreamMode = "updates"
	// StreamCustom: what nodes and tools send with Emit, EventCustom.
	StreamCustom StreamMode = "custom"
	// StreamCheckpoints: each commit, EventCheckpoint with Seq, Parent,
	// Status and Next.
	StreamCheckpoints StreamMode = "checkpoints"
	// StreamTasks: each task's start and end (EventNodeStart,
	// EventNodeEnd, with the error of a failed attempt).
	StreamTasks StreamMode = "tasks"
	// StreamMessages: model output as it arrives (EventMessage: a chunk
	// of a reply, with the node and task key), from models that stream
	// (agent.StreamingModel) called by nodes through package agent.
	StreamMessages StreamMode = "messages"
	// StreamDebug: every event the run emits.
	StreamDebug StreamMode = "debug"
)

// StreamModes lists the modes a Stream accepts.
func StreamModes() []StreamMode {
	return []StreamMode{StreamValues, StreamUpdates, StreamMessages, StreamCustom, StreamCheckpoints, StreamTasks, StreamDebug}
}

// StreamOptions tune a Stream.
type StreamOptions struct {
	// Modes to stream, several at once (default: values).
	Modes []StreamMode
	// Subgraphs includes the events of subgraphs, gates and handoffs
	// (their Namespace says where they happened).
	Subgraphs bool
	// Buffer is how many events may wait for the consumer (default 16).
	// When it is full the run waits: a slow consumer slows the run down
	// and memory stays bounded; no event is dropped.
	Buffer int
	// Run tunes the run itself.
	Run RunOptions
}

// streamModes is the set a Stream asked for.
type streamModes struct {
	modes     map[StreamMode]bool
	subgraphs bool
	root      string // the streaming runner's namespace
}

// wants reports whether a runner should emit events of kind for the stream.
func (m *streamModes) wants(kind EventKind) bool {
	if m == nil {
		return false
	}
	if m.modes[StreamDebug] {
		return true
	}
	switch kind {
	case EventValues:
		return m.modes[StreamValues]
	case EventUpdate, EventSteer:
		return m.modes[StreamUpdates]
	case EventCustom:
		return m.modes[StreamCustom]
	case EventMessage:
		return m.modes[StreamMessages]
	case EventCheckpoint:
		return m.modes[StreamCheckpoints]
	case EventNodeStart, EventNodeEnd:
		return m.modes[StreamTasks]
	case EventInterrupt, EventError:
		return true // how a run stops is always part of its stream
	}
	return false
}

// passes reports whether an emitted event goes to the consumer.
func (m *streamModes) passes(ev Event) bool {
	return m.wants(ev.Kind) && (m.subgraphs || ev.Namespace == m.root)
}

func (o StreamOptions) modes(root string) (*streamModes, error) {
	m := &streamModes{modes: map[StreamMode]bool{}, subgraphs: o.Subgraphs, root: root}
	if len(o.Modes) == 0 {
		m.modes[StreamValues] = true
	}
	for _, mode := range o.Modes {
		if !slices.Contains(StreamModes(), mode) {
			return nil, fmt.Errorf("%w: stream mode %q (values, updates, messages, custom, checkpoints, tasks, debug)", store.ErrInvalidArgument, mode)
		}
		m.modes[mode] = true
	}
	if o.Buffer < 0 {
		return nil, fmt.Errorf("%w: stream buffer %d", store.ErrInvalidArgument, o.Buffer)
	}
	return m, nil
}

// Stream runs the graph as Invoke does and yields its events as they
// happen, in order, then a last EventResult holding the Result, with the
// run's error if it failed. An interrupt yields EventInterrupt with its
// payload before the result. Breaking out of the loop cancels the run
// (nothing of the unfinished step is committed) and waits for it to stop.
func (r *Runner) Stream(ctx context.Context, thread string, input state.Update, so StreamOptions) iter.Seq2[Event, error] {
	return r.stream(ctx, so, func(ctx context.Context, sr *Runner) (Result, error) {
		return sr.Invoke(ctx, thread, input, so.Run)
	})
}

// StreamResume is Resume as a stream (see Stream).
func (r *Runner) StreamResume(ctx context.Context, thread string, value any, so StreamOptions) iter.Seq2[Event, error] {
	return r.stream(ctx, so, func(ctx context.Context, sr *Runner) (Result, error) {
		return sr.Resume(ctx, thread, value, so.Run)
	})
}

// StreamFrom is RunFrom as a stream (see Stream).
func (r *Runner) StreamFrom(ctx context.Context, thread string, seq int64, patch state.Patch, so StreamOptions) iter.Seq2[Event, error] {
	return r.stream(ctx, so, func(ctx context.Context, sr *Runner) (Result, error) {
		return sr.RunFrom(ctx, thread, seq, patch, so.Run)
	})
}

func (r *Runner) stream(ctx context.Context, so StreamOptions, run func(context.Context, *Runner) (Result, error)) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		modes, err := so.modes(r.opts.Namespace)
		if err != nil {
			yield(Event{Kind: EventResult}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := make(chan Event, cmp.Or(so.Buffer, 16))
		opts := r.opts
		opts.stream = modes
		opts.Observer = func(ev Event) {
			if r.opts.Observer != nil {
				r.opts.Observer(ev)
			}
			if modes.passes(ev) {
				select {
				case events <- ev:
				case <-ctx.Done():
				}
			}
		}
		sr := &Runner{g: r.g, s: r.s, opts: opts, m: r.m}
		var res Result
		var runErr error
		go func() {
			defer close(events)
			res, runErr = run(ctx, sr)
		}()
		for ev := range events {
			if !yield(ev, nil) {
				cancel()
				for range events {
				}
				return
			}
		}
		yield(Event{Kind: EventResult, RunID: res.RunID, Thread: res.Thread, Seq: res.Head, StopReason: res.StopReason, Namespace: r.opts.Namespace, Result: &res}, runErr)
	}
}

// Streaming reports whether the running task's run is streamed in mode,
// so that a node asks a model to stream only when someone listens.
func Streaming(ctx context.Context, mode StreamMode) bool {
	t := taskOf(ctx)
	if t == nil || t.runner.opts.stream == nil {
		return false
	}
	m := t.runner.opts.stream
	return m.modes[mode] || m.modes[StreamDebug]
}

// Redactor is the redactor of the running task's run (Options.Redact),
// nil when it hides no secrets. What a node streams piece by piece must
// pass through its Stream (or go in pieces it can judge whole, such as a
// whole tool call): every event is redacted, but a secret split across
// two pieces would pass unseen.
func Redactor(ctx context.Context) *redact.Redactor {
	if t := taskOf(ctx); t != nil {
		return t.runner.opts.Redact
	}
	return nil
}

// EmitMessage sends a piece of model output (encoded as JSON) to the
// streams of the running task's run (messages mode), with the task's node,
// key and namespace. Outside a node, or when nobody streams messages, it
// does nothing.
func EmitMessage(ctx context.Context, chunk any) error {
	return emitKind(ctx, EventMessage, chunk)
}

// Emit sends v (encoded as JSON) to the streams of the running task's run
// (custom mode), from a node or a tool it calls, with the task's node and
// namespace. Outside a node, or when nobody streams custom events, it does
// nothing. v is redacted like every event.
func Emit(ctx context.Context, v any) error {
	return emitKind(ctx, EventCustom, v)
}

func emitKind(ctx context.Context, kind EventKind, v any) error {
	t := taskOf(ctx)
	if t == nil || !t.runner.opts.stream.wants(kind) {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("flow: emit %s: %w", kind, err)
	}
	t.runner.emit(Event{Kind: kind, RunID: t.info.RunID, Thread: t.info.Thread, Seq: t.info.ReadSeq, Node: t.info.Node, Key: t.info.Key, Payload: b})
	return nil
}

// emitValues sends the run's state to a stream in values mode.
func (r *Runner) emitValues(run *run) {
	if r.opts.stream.wants(EventValues) {
		doc := run.doc
		r.emit(Event{Kind: EventValues, RunID: run.id, Thread: run.thread, Seq: run.head, State: &doc, Committed: r.opts.Durability == DurabilitySync})
	}
}

// emitCheckpoint sends a commit to a stream in checkpoints mode;
// committed says it is stored already (not queued by an async run).
func (r *Runner) emitCheckpoint(run *run, cp store.Checkpoint, committed bool) {
	if r.opts.stream.wants(EventCheckpoint) {
		st := cp.Status
		if st == 0 {
			st = store.StatusSuccess
		}
		r.emit(Event{Kind: EventCheckpoint, RunID: run.id, Thread: run.thread, Seq: run.head, Parent: cp.Parent, Status: st.String(), Next: cp.Meta.Next, Nodes: cp.Nodes, Source: cp.Meta.Source, Committed: committed})
	}
}

// Filter returns what a Stream with these options yields of the events of
// a runner in namespace root, for a caller that watches a run through
// Options.Observer, which sees every event: it checks the options as
// Stream does.
func (o StreamOptions) Filter(root string) (func(Event) bool, error) {
	m, err := o.modes(root)
	if err != nil {
		return nil, err
	}
	return m.passes, nil
}
