package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/state"
)

// START and END are the graph's entry and exit. INPUT is the node an
// update names to be a run's input (UpdateState).
const (
	START = "__start__"
	END   = "__end__"
	INPUT = "__input__"
)

// NodeFunc is a node: it reads the state and returns a partial update for
// the schema's reducers. Use Info(ctx) for the run's thread, step and
// idempotency key, Input(ctx) for a Send's input, and Interrupt to ask a
// human.
type NodeFunc func(ctx context.Context, s state.Doc) (state.Update, error)

// RouteFunc chooses what runs after a node, from the state after its step.
// Returning no targets, or only END, ends that branch.
type RouteFunc func(ctx context.Context, s state.Doc) ([]Target, error)

// Target is one scheduled task: a node, and optionally an input of its own
// (LangGraph's Send), which the node reads with Input(ctx).
type Target struct {
	Node  string
	Input json.RawMessage
}

// To schedules nodes with the shared state.
func To(nodes ...string) []Target {
	out := make([]Target, len(nodes))
	for i, n := range nodes {
		out[i] = Target{Node: n}
	}
	return out
}

// Send schedules node with its own input (map-reduce fan-out).
func Send(node string, input any) (Target, error) {
	b, err := json.Marshal(input)
	if err != nil {
		return Target{}, fmt.Errorf("%w: send to %q: %v", ErrInvalidGraph, node, err)
	}
	return Target{Node: node, Input: b}, nil
}

// RetryPolicy retries a failing node. Zero values mean: 1 attempt.
type RetryPolicy struct {
	Attempts int           // total attempts, at least 1
	Initial  time.Duration // first backoff (default 100ms)
	Max      time.Duration // backoff cap (default 10s)
	// Retryable decides which errors are retried (default: all except
	// interrupts and cancellations).
	Retryable func(error) bool
}

// NodeOption configures a node.
type NodeOption func(*node)

// WithRetry sets a node's retry policy.
func WithRetry(p RetryPolicy) NodeOption { return func(n *node) { n.retry = p } }

type node struct {
	name  string
	fn    NodeFunc
	retry RetryPolicy
	child *Compiled // AddSubgraph's
}

// Graph is built with AddNode, AddEdge and AddRouter, then compiled.
type Graph struct {
	schema  *state.Schema
	nodes   map[string]*node
	order   []string
	edges   map[string][]string // static successors
	routers map[string]RouteFunc
	errs    []error
	limit   int
	rules   []Rules
}

// NewGraph starts a graph whose state follows schema.
func NewGraph(schema *state.Schema) *Graph {
	if schema == nil {
		schema = state.MustSchema()
	}
	return &Graph{schema: schema, nodes: map[string]*node{}, edges: map[string][]string{}, routers: map[string]RouteFunc{}}
}

// AddSubgraph adds a node that runs child as a subgraph (Subgraph), and
// that the compiled graph lists among its Subgraphs.
func (g *Graph) AddSubgraph(name string, child *Compiled, opts SubgraphOptions, nopts ...NodeOption) *Graph {
	return g.AddNode(name, Subgraph(child, opts), append(slices.Clone(nopts), func(n *node) { n.child = child })...)
}

// Subgraphs are the graph's subgraph nodes (AddSubgraph) by name.
func (c *Compiled) Subgraphs() map[string]*Compiled {
	out := map[string]*Compiled{}
	for name, n := range c.nodes {
		if n.child != nil {
			out[name] = n.child
		}
	}
	return out
}

// AddNode adds a node. Names must be unique and not START or END.
func (g *Graph) AddNode(name string, fn NodeFunc, opts ...NodeOption) *Graph {
	switch {
	case name == "" || name == START || name == END:
		g.errs = append(g.errs, fmt.Errorf("%w: node name %q is reserved or empty", ErrInvalidGraph, name))
		return g
	case fn == nil:
		g.errs = append(g.errs, fmt.Errorf("%w: node %q has no function", ErrInvalidGraph, name))
		return g
	case g.nodes[name] != nil:
		g.errs = append(g.errs, fmt.Errorf("%w: node %q added twice", ErrInvalidGraph, name))
		return g
	}
	n := &node{name: name, fn: fn}
	for _, o := range opts {
		o(n)
	}
	g.nodes[name] = n
	g.order = append(g.order, name)
	return g
}

// AddEdge makes to run in the step after from (from may be START, to END).
func (g *Graph) AddEdge(from, to string) *Graph {
	g.edges[from] = append(g.edges[from], to)
	return g
}

// AddRouter makes fn choose what runs after from.
func (g *Graph) AddRouter(from string, fn RouteFunc) *Graph {
	if g.routers[from] != nil {
		g.errs = append(g.errs, fmt.Errorf("%w: node %q has two routers", ErrInvalidGraph, from))
	}
	g.routers[from] = fn
	return g
}

// WithRecursionLimit sets the graph's own step limit per run, used when
// the runner's options set none (a graph that knows how long it runs, as
// an agent network bounded by its turns). Negative: no limit.
func (g *Graph) WithRecursionLimit(n int) *Graph {
	g.limit = n
	return g
}

// WithRules adds rules of the graph's kind of state (see Rules): every
// runner of the graph applies them, before its options' own.
func (g *Graph) WithRules(rs ...Rules) *Graph {
	g.rules = append(g.rules, rs...)
	return g
}

// Chain adds the nodes as a line: START → first → … → last → END.
func (g *Graph) Chain(names ...string) *Graph {
	prev := START
	for _, n := range names {
		g.AddEdge(prev, n)
		prev = n
	}
	return g.AddEdge(prev, END)
}

// Compiled is a validated graph, safe for concurrent runs.
type Compiled struct {
	order   []string // node names in the order they were added
	limit   int      // WithRecursionLimit
	rules   []Rules
	schema  *state.Schema
	nodes   map[string]*node
	edges   map[string][]string
	routers map[string]RouteFunc
}

// Compile checks the graph: every edge names a known node, START has a
// way out, every node is reachable from START.
func (g *Graph) Compile() (*Compiled, error) {
	errs := slices.Clone(g.errs)
	errs = append(errs, g.edgeErrors()...)
	seen := g.reachable()
	for _, n := range g.order {
		if !seen[n] {
			errs = append(errs, fmt.Errorf("%w: node %q cannot be reached from START", ErrInvalidGraph, n))
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	c := &Compiled{order: slices.Clone(g.order), schema: g.schema, nodes: g.nodes, edges: map[string][]string{}, routers: map[string]RouteFunc{}, limit: g.limit, rules: slices.Clone(g.rules)}
	for k, v := range g.edges {
		c.edges[k] = slices.Clone(v)
	}
	for k, v := range g.routers {
		c.routers[k] = v
	}
	return c, nil
}

func (g *Graph) known(n string) bool { return n == START || n == END || g.nodes[n] != nil }

// edgeErrors checks edges and routers: known nodes at both ends, nothing
// out of END or into START, and a way out of START.
func (g *Graph) edgeErrors() []error {
	var errs []error
	froms := slices.Sorted(maps.Keys(g.edges))
	for _, from := range froms {
		if from == END {
			errs = append(errs, fmt.Errorf("%w: edge out of END", ErrInvalidGraph))
		}
		if !g.known(from) {
			errs = append(errs, fmt.Errorf("%w: edge from unknown node %q", ErrInvalidGraph, from))
		}
		for _, to := range g.edges[from] {
			if to == START {
				errs = append(errs, fmt.Errorf("%w: edge into START from %q", ErrInvalidGraph, from))
			}
			if !g.known(to) {
				errs = append(errs, fmt.Errorf("%w: edge %q → unknown node %q", ErrInvalidGraph, from, to))
			}
		}
	}
	for from := range g.routers {
		if !g.known(from) || from == END {
			errs = append(errs, fmt.Errorf("%w: router on unknown node %q", ErrInvalidGraph, from))
		}
	}
	if len(g.edges[START]) == 0 && g.routers[START] == nil {
		errs = append(errs, fmt.Errorf("%w: nothing follows START", ErrInvalidGraph))
	}
	return errs
}

// reachable is the set of nodes reachable from START over static edges; a
// node with a router may reach any.
func (g *Graph) reachable() map[string]bool {
	seen := map[string]bool{START: true}
	queue := []string{START}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		next := g.edges[cur]
		if g.routers[cur] != nil {
			next = g.order
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return seen
}

// Schema returns the graph's state schema.
func (c *Compiled) Schema() *state.Schema { return c.schema }

// successors returns what follows node, given the state after its step:
// static edges first, then the router's targets.
func (c *Compiled) successors(ctx context.Context, from string, s state.Doc) ([]Target, error) {
	out := To(c.edges[from]...)
	if r := c.routers[from]; r != nil {
		ts, err := r(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("router after %q: %w", from, err)
		}
		for _, t := range ts {
			if t.Node != END && c.nodes[t.Node] == nil {
				return nil, fmt.Errorf("%w: router after %q chose unknown node %q", ErrInvalidGraph, from, t.Node)
			}
		}
		out = append(out, ts...)
	}
	return out, nil
}
