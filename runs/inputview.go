package runs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// A LangGraph run writes two checkpoints before its first node: the
// thread's state as it was, with next [__start__] and the input pending
// (source "input"), then the input applied (source "loop"). Cairn stores
// one, the input applied: the state before it is its parent's, stored
// already. The API shows Cairn's one as LangGraph's two: the stored
// checkpoint as source "loop", and before it its input view, built from
// the parent's state (the graph's empty state for a thread's first run),
// with an id of its own (InputCheckpointID) that every request naming a
// checkpoint accepts. Nothing is stored for it.

// sourceInput is the Meta.Source of a run's input checkpoint.
const sourceInput = "input"

// RunInput reports whether cp is a run's input checkpoint, which the API
// shows with an input view before it.
func RunInput(cp store.Checkpoint) bool { return cp.Meta.Source == sourceInput }

// inputRef is the reference of the input view before cp.
func inputRef(cp store.Checkpoint) CheckpointRef {
	id := InputCheckpointID(cp.Seq)
	return CheckpointRef{ThreadID: APIThreadID(cp.Thread), CheckpointNS: APINamespace(cp.Namespace), CheckpointID: &id}
}

// InputView is the input checkpoint shown before cp, a run's input
// checkpoint: values (the state before the input), next __start__, its
// step the one before cp's; its metadata is cp's run's.
func InputView(cp store.Checkpoint, values json.RawMessage) State {
	md := CheckpointMetadata(cp)
	md["source"], md["step"] = "input", cp.Seq-2
	md["cairn"] = map[string]any{"input_of": cp.Seq, "parent": cp.Parent}
	task := Task{ID: TaskID(cp, flow.START, 0), Name: flow.START, Interrupts: []Interrupt{}}
	v := State{Values: values, Next: []string{flow.START}, Tasks: []Task{task}, Checkpoint: inputRef(cp), Metadata: md, Interrupts: []Interrupt{}}
	created := APITime(cp.CreatedAt)
	v.CreatedAt = &created
	if cp.Parent > 0 {
		p := NewCheckpointRef(cp.Thread, cp.Namespace, cp.Parent)
		v.ParentCheckpoint = &p
	}
	return v
}

// InputView is the input view before cp, a run's input checkpoint, with
// the state of cp's parent.
func (s *Service) InputView(ctx context.Context, cp store.Checkpoint) (State, error) {
	if cp.Parent == 0 {
		return InputView(cp, s.emptyValues(ctx, cp.Thread, cp.Namespace)), nil
	}
	p, err := s.store.Load(ctx, store.LoadRequest{Thread: cp.Thread, Namespace: cp.Namespace, Seq: cp.Parent})
	if err != nil {
		return State{}, err
	}
	return InputView(cp, p.State.AppendJSON(nil)), nil
}

// emptyValues is the state of a thread's namespace before its first
// checkpoint, as its assistant's graph gives it: its list fields empty
// (LangGraph's defaults: messages []), the rest absent.
func (s *Service) emptyValues(ctx context.Context, thread, ns string) json.RawMessage {
	th, err := s.store.Thread(ctx, thread)
	if err != nil {
		return json.RawMessage("{}")
	}
	a, err := s.ThreadAssistant(ctx, th)
	if err != nil {
		return json.RawMessage("{}")
	}
	if e, ok := a.(interface {
		emptyValues(ns string) json.RawMessage
	}); ok {
		return e.emptyValues(ns)
	}
	return json.RawMessage("{}")
}

// emptyValues implements the empty state of a Go graph or of a subgraph
// of it (ns: the run's namespace, each level "node:step").
func (g *Graph) emptyValues(ns string) json.RawMessage {
	c := subgraphAt(g.drawing(), ns)
	if c == nil {
		return json.RawMessage("{}")
	}
	return emptyOf(c.Schema())
}

// emptyOf is the empty state of a schema: a list for each list field.
func emptyOf(s *state.Schema) json.RawMessage {
	out := map[string]any{}
	for _, f := range s.Fields() {
		switch s.Reducer(f) {
		case state.ReducerMessages, state.ReducerAppend:
			out[f] = []any{}
		}
	}
	return raw(out)
}

// statePayload is a thread state as checkpoints-mode events carry it.
func statePayload(v State) map[string]any {
	cfg := func(r *CheckpointRef) any {
		if r == nil || r.CheckpointID == nil {
			return nil
		}
		return map[string]any{"configurable": *r}
	}
	return map[string]any{"config": cfg(&v.Checkpoint), "parent_config": cfg(v.ParentCheckpoint), "next": v.Next, "values": v.Values,
		"metadata": maps.Clone(v.Metadata), "tasks": v.Tasks}
}

// StateAt is the stored checkpoint whose state the checkpoint at of a
// namespace of a thread shows: Seq itself, or, for the input view before
// a run's input checkpoint, that checkpoint's parent — ErrState when the
// view comes before the thread's first checkpoint.
func (s *Service) StateAt(ctx context.Context, thread, ns string, at CheckpointAt) (int64, error) {
	if !at.Input {
		return at.Seq, nil
	}
	cp, err := s.InputOf(ctx, thread, ns, at.Seq)
	if err != nil {
		return 0, err
	}
	if cp.Parent == 0 {
		return 0, newError(ErrState, "%s is thread %q's empty state before its first checkpoint: start a new thread instead", InputCheckpointID(at.Seq), APIThreadID(thread))
	}
	return cp.Parent, nil
}

// InputOf loads checkpoint seq, a run's input checkpoint (ErrNotFound if
// it is not one: no input view comes before it).
func (s *Service) InputOf(ctx context.Context, thread, ns string, seq int64) (store.Checkpoint, error) {
	cp, err := s.store.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns, Seq: seq})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !RunInput(cp)) {
		return cp, newError(ErrNotFound, "thread %q has no checkpoint %s%s", APIThreadID(thread), InputCheckpointID(seq), nsSuffix(ns))
	}
	return cp, err
}
