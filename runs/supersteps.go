package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Superstep is one step of a thread made from updates (POST /threads
// supersteps, LangGraph's bulk update): the updates, each written as the
// node it names.
type Superstep struct {
	Updates []SuperstepUpdate `json:"updates"`
}

// SuperstepUpdate is one node's update in a superstep.
type SuperstepUpdate struct {
	Values json.RawMessage `json:"values"`
	AsNode string          `json:"as_node"`
}

// inputNode is LangGraph's name for the update that is a run's input.
const inputNode = flow.INPUT

// CheckSupersteps reads the supersteps of a thread to be made: the
// assistant its metadata names (graph_id or assistant_id) and, for each
// update, an object of state fields written as one of its nodes,
// __start__, or __input__ (the input, written as __start__). Nothing is
// created.
func (s *Service) CheckSupersteps(ctx context.Context, raw json.RawMessage, md map[string]any) ([]Superstep, Assistant, error) {
	if IsNull(raw) {
		return nil, nil, nil
	}
	var steps []Superstep
	if err := json.Unmarshal(raw, &steps); err != nil {
		return nil, nil, invalid("$.supersteps", "want a list of {updates: [{values, as_node}]}: %v", err)
	}
	id, _ := md["graph_id"].(string)
	if id == "" {
		id, _ = md["assistant_id"].(string)
	}
	if id == "" {
		return nil, nil, invalid("$.metadata.graph_id", "a thread made from supersteps names its graph (graph_id)")
	}
	a, err := s.AssistantGraph(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	nodes := a.Info().Nodes
	for i, st := range steps {
		if len(st.Updates) == 0 {
			return nil, nil, invalid(fmt.Sprintf("$.supersteps[%d].updates", i), "empty")
		}
		for j, u := range st.Updates {
			at := fmt.Sprintf("$.supersteps[%d].updates[%d]", i, j)
			var obj map[string]json.RawMessage
			if json.Unmarshal(u.Values, &obj) != nil && !IsNull(u.Values) {
				return nil, nil, invalid(at+".values", "want an object of state fields")
			}
			if u.AsNode != inputNode && u.AsNode != flow.START && !slices.Contains(nodes, u.AsNode) {
				return nil, nil, invalid(at+".as_node", "%q is not a node of %q (%v), __start__ or __input__", u.AsNode, id, nodes)
			}
		}
	}
	return steps, a, nil
}

// ApplySupersteps writes a new thread's supersteps, each update as its
// node in order (a superstep of several nodes is several checkpoints);
// where one fails, the thread is deleted and the error returned.
func (s *Service) ApplySupersteps(ctx context.Context, th store.Thread, a Assistant, steps []Superstep) error {
	uctx := s.UpdateContext(ctx, th)
	for i, st := range steps {
		for _, u := range st.Updates {
			var upd state.Update
			if !IsNull(u.Values) {
				_ = json.Unmarshal(u.Values, &upd) // checked
			}
			node := u.AsNode
			switch {
			case node == inputNode && startsNext(steps, i):
				continue // the input is what __start__ writes next (LangGraph's input checkpoint, then its step 0)
			case node == flow.START && i > 0 && inputOnly(steps[i-1]):
				node = flow.INPUT
			}
			if _, err := a.UpdateState(uctx, s.store, th.ID, 0, upd, node); err != nil {
				_ = s.store.DeleteThread(context.WithoutCancel(ctx), th.ID)
				return err
			}
		}
	}
	return nil
}

// inputOnly: a superstep is the input alone.
func inputOnly(st Superstep) bool {
	return len(st.Updates) == 1 && st.Updates[0].AsNode == inputNode
}

// startsNext: superstep i is the input alone and the next one __start__
// alone, the pair a run's start writes in LangGraph (its input
// checkpoint, then the input applied), which Cairn stores as one
// checkpoint, the input applied.
func startsNext(steps []Superstep, i int) bool {
	return inputOnly(steps[i]) && i+1 < len(steps) && len(steps[i+1].Updates) == 1 && steps[i+1].Updates[0].AsNode == flow.START
}
