package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// subgraphAt is the subgraph of c that runs in namespace ns (each level
// "node:step", as flow.Subgraph names it); nil when there is none.
func subgraphAt(c *flow.Compiled, ns string) *flow.Compiled {
	for part := range strings.SplitSeq(ns, "/") {
		if c == nil || part == "" {
			break
		}
		name, _, _ := strings.Cut(part, ":")
		c = c.Subgraphs()[name]
	}
	return c
}

// UpdateSubgraph writes values into the state of a subgraph's namespace
// ns of a thread (LangGraph's update_state with a checkpoint_ns), at the
// namespace's head, as node asNode of the subgraph — by default the node
// that wrote that state, as at the root. A subgraph paused inside stays
// paused; the thread's next run goes on in the subgraph from the update.
// Only a Go graph's subgraphs (flow.Graph.AddSubgraph) have one.
func (s *Service) UpdateSubgraph(ctx context.Context, th store.Thread, a Assistant, ns string, values state.Update, asNode string) (store.Checkpoint, error) {
	const at = "$.checkpoint.checkpoint_ns"
	g, ok := a.(*Graph)
	if !ok {
		return store.Checkpoint{}, invalid(at, "%q: assistant %q has no subgraphs", APINamespace(ns), a.Info().ID)
	}
	c, err := g.compiled(ctx)
	if err != nil {
		return store.Checkpoint{}, err
	}
	child := subgraphAt(c, ns)
	if child == nil || ns == "" {
		return store.Checkpoint{}, invalid(at, "%q is no subgraph of %q (GET /assistants/%s/subgraphs lists them)", APINamespace(ns), a.Info().ID, a.Info().ID)
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID, Namespace: ns})
	if errors.Is(err, store.ErrNotFound) {
		return store.Checkpoint{}, newError(ErrNotFound, "thread %q has no checkpoint in namespace %q: the subgraph has not run", APIThreadID(th.ID), APINamespace(ns))
	}
	if err != nil {
		return store.Checkpoint{}, err
	}
	if asNode, err = s.subgraphNode(ctx, head, child, asNode); err != nil {
		return store.Checkpoint{}, err
	}
	opts := g.Options
	opts.Namespace, opts.Observer, opts.InterruptBefore, opts.InterruptAfter = ns, nil, nil, nil
	r, err := flow.NewRunner(child, s.store, opts)
	if err != nil {
		return store.Checkpoint{}, err
	}
	coerceMessages(child.Schema(), values)
	return r.UpdateState(ctx, th.ID, values, asNode)
}

// subgraphNode is the node an update of a subgraph's head is written as:
// the one asked for, else the one that wrote the head's state.
func (s *Service) subgraphNode(ctx context.Context, head store.Checkpoint, child *flow.Compiled, asNode string) (string, error) {
	nodes := child.Nodes()
	if asNode != "" {
		if asNode != flow.START && !slices.Contains(nodes, asNode) {
			return "", invalid("$.as_node", "%q is not a node of the subgraph (%v) or __start__", asNode, nodes)
		}
		return asNode, nil
	}
	return s.writerNode(ctx, head, nodes, "the subgraph's state")
}

// subgraphRef is the namespace a subgraph paused inside the step of cp
// (a static pause "within" a node) runs in, as a task's checkpoint: its
// node's name and the step it read, as flow.Subgraph names it (nil when
// cp is no such pause).
func subgraphRef(cp store.Checkpoint, node string) *TaskCheckpoint {
	var p struct {
		Within json.RawMessage `json:"within"`
	}
	if json.Unmarshal(cp.Meta.Interrupt, &p) != nil || len(p.Within) == 0 || cp.Meta.StepOf == 0 {
		return nil
	}
	ns := node + ":" + strconv.FormatInt(cp.Meta.StepOf, 10)
	if i := slices.Index(cp.Meta.Next, node); i > 0 {
		ns += "." + strconv.Itoa(i)
	}
	if cp.Namespace != "" {
		ns = cp.Namespace + "/" + ns
	}
	return &TaskCheckpoint{ThreadID: APIThreadID(cp.Thread), CheckpointNS: APINamespace(ns)}
}
