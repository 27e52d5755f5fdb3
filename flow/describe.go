package flow

import (
	"slices"
	"sort"
)

// Edge is one edge of a compiled graph: From leads to To, always
// (Conditional false) or when a router chooses it. A router's targets are
// not known ahead of its run, so a conditional edge's To is "" (any node).
type Edge struct {
	From, To    string
	Conditional bool
}

// Nodes returns the graph's node names, in the order they were added.
func (c *Compiled) Nodes() []string {
	return slices.Clone(c.order)
}

// Edges returns the graph's edges: static edges first (by source, in node
// order), then one conditional edge per router.
func (c *Compiled) Edges() []Edge {
	var out []Edge
	rank := map[string]int{START: -1, END: len(c.order)}
	for i, n := range c.order {
		rank[n] = i
	}
	from := make([]string, 0, len(c.edges))
	for f := range c.edges {
		from = append(from, f)
	}
	sort.Slice(from, func(i, j int) bool { return rank[from[i]] < rank[from[j]] })
	for _, f := range from {
		for _, t := range c.edges[f] {
			out = append(out, Edge{From: f, To: t})
		}
	}
	routers := make([]string, 0, len(c.routers))
	for f := range c.routers {
		routers = append(routers, f)
	}
	sort.Slice(routers, func(i, j int) bool { return rank[routers[i]] < rank[routers[j]] })
	for _, f := range routers {
		out = append(out, Edge{From: f, Conditional: true})
	}
	return out
}
