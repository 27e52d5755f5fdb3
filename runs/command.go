package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// DefaultNode is the node an update is written as: the one asked for,
// or the node that wrote the state of the checkpoint it applies to, as
// LangGraph's update_state chooses it (START when none did; refused when
// several did in one step).
func (s *Service) DefaultNode(ctx context.Context, th store.Thread, at int64, asNode string, a Assistant) (string, error) {
	nodes := a.Info().Nodes
	if g, ok := a.(*Graph); ok && g.Factory != nil {
		if c, err := g.compiled(ctx); err == nil {
			nodes = c.Nodes() // the graph built for the thread's config
		}
	}
	if asNode != "" {
		if asNode != flow.START && asNode != flow.INPUT && !slices.Contains(nodes, asNode) {
			return "", invalid("$.as_node", "%q is not a node of assistant %q (%v), __start__ or __input__", asNode, a.Info().ID, nodes)
		}
		return asNode, nil
	}
	if th.Head == 0 {
		return flow.START, nil
	}
	cp, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID, Seq: at})
	if errors.Is(err, store.ErrNotFound) {
		return "", newError(ErrNotFound, "thread %q has no checkpoint %s", APIThreadID(th.ID), CheckpointID(at))
	}
	if err != nil {
		return "", err
	}
	return s.writerNode(ctx, cp, nodes, "the state of checkpoint "+CheckpointID(cp.Seq))
}

// writerNode is the node an update without as_node is written as: the
// one of nodes that wrote cp's state, START when none did, refused when
// several did in one step (what names cp's state in the error).
func (s *Service) writerNode(ctx context.Context, cp store.Checkpoint, nodes []string, what string) (string, error) {
	w, err := s.writers(ctx, cp)
	switch {
	case err != nil:
		return "", err
	case len(w) > 1:
		return "", invalid("$.as_node", "%s was written by the nodes %q in one step: name the node the update is written as", what, w)
	case len(w) == 1 && slices.Contains(nodes, w[0]):
		return w[0], nil
	}
	return flow.START, nil
}

// writers are the nodes that wrote a checkpoint's state (START, the
// input, only when no node did: the steps an exit-durability checkpoint
// holds follow it). A pause, an interrupt or a failed step wrote nothing:
// its state is that of the checkpoint its step read (Meta.StepOf), whose
// writers they are — there LangGraph's thread stands, and the node that
// paused runs again after the update.
func (s *Service) writers(ctx context.Context, cp store.Checkpoint) ([]string, error) {
	if (cp.Status == store.StatusInterrupted || cp.Status == store.StatusFailed) && cp.Meta.StepOf > 0 && cp.Meta.StepOf != cp.Seq {
		src, err := s.store.Load(ctx, store.LoadRequest{Thread: cp.Thread, Namespace: cp.Namespace, Seq: cp.Meta.StepOf})
		if err != nil {
			return nil, err
		}
		cp.Nodes = src.Nodes
	}
	if len(cp.Nodes) > 1 {
		return slices.DeleteFunc(slices.Clone(cp.Nodes), func(n string) bool { return n == flow.START }), nil
	}
	return cp.Nodes, nil
}

// applyUpdate applies a run's command.update before it goes on
// (LangGraph's Command(update=…)): written as an update of the state is
// written without as_node, naming the run, so that a resume of the run
// after a crash finds it applied (the run has started) and does not apply
// it again.
func (m *runManager) applyUpdate(ctx context.Context, lr *Run, raw json.RawMessage) error {
	a, ok := m.s.assistants[lr.data.Graph()]
	if !ok {
		return newError(ErrState, "assistant %q is no longer served", lr.data.Graph())
	}
	var upd state.Update
	if err := json.Unmarshal(raw, &upd); err != nil {
		return invalid("$.command.update", "want an object of state fields: %v", err)
	}
	th, err := m.s.store.Thread(ctx, lr.rec.Thread)
	if err != nil {
		return err
	}
	if th.Head == 0 {
		return invalid("$.command.update", "thread %q has no state to update yet: start it with an input", APIThreadID(th.ID))
	}
	ctx = withRunConfig(ctx, lr.data.Kwargs)
	asNode, err := m.s.DefaultNode(ctx, th, 0, "", a)
	if err != nil {
		return err
	}
	_, err = a.UpdateState(flow.WithUpdateRun(ctx, lr.rec.ID), m.s.store, th.ID, 0, upd, asNode)
	return err
}

// checkUpdatable refuses a command.update on a thread with no state to
// update (a stateless run, a thread not made yet or without a
// checkpoint), before anything is created.
func (s *Service) checkUpdatable(ctx context.Context, threadID string) error {
	if threadID == "" {
		return invalid("$.command.update", "a stateless run has no state to update")
	}
	th, err := s.Thread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return invalid("$.command.update", "thread %q does not exist, so it has no state to update: start it with an input", threadID)
	}
	if err != nil {
		return err
	}
	if th.Head == 0 {
		return invalid("$.command.update", "thread %q has no state to update yet: start it with an input", threadID)
	}
	return nil
}

// UpdateContext is the context an update of a thread's state is written
// with: its assistant's config and context, so that a graph built per
// config (Graph.Factory) is the graph the thread's runs run.
func (s *Service) UpdateContext(ctx context.Context, th store.Thread) context.Context {
	id, _ := th.Metadata["assistant_id"].(string)
	if id == "" {
		return ctx
	}
	_, rec, err := s.resolve(ctx, id)
	if err != nil || rec == nil {
		return ctx
	}
	return withRunConfig(ctx, Kwargs{Config: rec.runConfig(nil), Context: rec.runContext(nil)})
}
