package difftest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// concat is the custom reducer: string concatenation, order-sensitive.
func concat(cur, upd json.RawMessage) (json.RawMessage, error) {
	var a, b string
	if cur != nil {
		if err := json.Unmarshal(cur, &a); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(upd, &b); err != nil {
		return nil, err
	}
	return json.Marshal(a + b)
}

func parentSchema() *state.Schema {
	return state.MustSchema(
		state.WithReducer("concat", concat),
		state.WithField("step", state.ReducerAdd),
		state.WithField("r", state.ReducerReplace),
		state.WithField("a", state.ReducerAppend),
		state.WithField("m", state.ReducerMessages),
		state.WithField("o", state.ReducerMerge),
		state.WithField("n", state.ReducerAdd),
		state.WithField("c", "concat"),
	)
}

// docIDs lists the ids of a document's messages.
func docIDs(d state.Doc) []string {
	var ids []string
	for _, raw := range d.Elements("m") {
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &m) // every stored message is an object with an id
		ids = append(ids, m.ID)
	}
	return ids
}

func docStep(d state.Doc) int64 {
	var v int64
	_ = d.Get("step", &v) // absent: 0
	return v
}

func toUpdate(m map[string]json.RawMessage) state.Update {
	u := make(state.Update, len(m))
	for k, v := range m {
		u[k] = v
	}
	return u
}

// childGraph is the subgraph: its own schema, two nodes, a message added
// by one and removed by the other.
func childGraph() (*flow.Compiled, error) {
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend), state.WithField("m", state.ReducerMessages))
	g := flow.NewGraph(schema)
	g.AddNode("c1", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"log": []string{"c1"}, "m": []state.Message{{ID: "x", Content: "c1"}}}, nil
	})
	g.AddNode("c2", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"log": []string{"c2"}, "m": []state.Message{state.RemoveMessage("x")}}, nil
	})
	g.AddEdge(flow.START, "c1").AddEdge("c1", "c2").AddEdge("c2", flow.END)
	return g.Compile()
}

// buildGraph compiles the graph a script describes: "lead" counts the
// steps and its router schedules the next script step; w0..w3 write the
// script's specs, "s" the spec its Send carries, "sub" runs the child
// graph, "ask" interrupts for an answer.
func buildGraph(sc script) (*flow.Compiled, error) {
	g := flow.NewGraph(parentSchema())
	g.AddNode("lead", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"step": 1}, nil
	})
	g.AddRouter("lead", func(_ context.Context, d state.Doc) ([]flow.Target, error) {
		v := docStep(d)
		if v < 1 || v > int64(len(sc)) {
			return nil, nil
		}
		ts := flow.To("lead")
		for _, e := range sc[v-1] {
			if e.Kind != kindSend {
				ts = append(ts, flow.Target{Node: e.Node})
				continue
			}
			t, err := flow.Send("s", e.Spec)
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		return ts, nil
	})
	g.AddEdge(flow.START, "lead")
	for i := range 4 {
		name := fmt.Sprintf("w%d", i)
		g.AddNode(name, func(_ context.Context, d state.Doc) (state.Update, error) {
			v := docStep(d)
			if v < 1 || v > int64(len(sc)) {
				return nil, fmt.Errorf("%s ran at step %d of %d", name, v, len(sc))
			}
			for _, e := range sc[v-1] {
				if e.Node == name {
					return toUpdate(resolve(e.Spec, docIDs(d))), nil
				}
			}
			return nil, fmt.Errorf("%s is not in script step %d", name, v)
		})
	}
	g.AddNode("s", func(ctx context.Context, d state.Doc) (state.Update, error) {
		var w writeSpec
		if err := json.Unmarshal(flow.Input(ctx), &w); err != nil {
			return nil, err
		}
		return toUpdate(resolve(w, docIDs(d))), nil
	})
	g.AddNode("ask", func(ctx context.Context, d state.Doc) (state.Update, error) {
		var answer string
		if err := flow.Interrupt(ctx, map[string]int64{"ask": docStep(d)}, &answer); err != nil {
			return nil, err
		}
		return toUpdate(askUpdate(answer)), nil
	})
	child, err := childGraph()
	if err != nil {
		return nil, err
	}
	g.AddSubgraph("sub", child, flow.SubgraphOptions{
		Input: func(_ context.Context, p state.Doc) (state.Update, error) {
			in := "in:none"
			if raw, ok := p.Raw("n"); ok {
				in = "in:" + string(raw)
			}
			return state.Update{"log": []string{in}}, nil
		},
		Output: func(_ context.Context, c state.Doc) (state.Update, error) {
			n, _ := c.ListLen("log")
			raw, _ := c.Raw("log")
			return state.Update{"a": raw, "n": n}, nil
		},
	})
	return g.Compile()
}
