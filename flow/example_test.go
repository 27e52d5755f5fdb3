package flow_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A graph with a router loop and a human approval: the run stops at the
// interrupt, and Resume continues exactly there with the answer.
func Example() {
	schema := state.MustSchema(state.WithField("drafts", state.ReducerAppend))
	g := flow.NewGraph(schema).
		AddNode("write", func(ctx context.Context, s state.Doc) (state.Update, error) {
			n, _ := s.ListLen("drafts")
			return state.Update{"drafts": fmt.Sprintf("draft %d", n+1)}, nil
		}).
		AddNode("approve", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var ok bool
			if err := flow.Interrupt(ctx, "publish the last draft?", &ok); err != nil {
				return nil, err
			}
			return state.Update{"approved": ok}, nil
		}).
		AddEdge(flow.START, "write").
		AddRouter("write", func(ctx context.Context, s state.Doc) ([]flow.Target, error) {
			if n, _ := s.ListLen("drafts"); n < 3 {
				return flow.To("write"), nil
			}
			return flow.To("approve"), nil
		}).
		AddEdge("approve", flow.END)
	compiled, err := g.Compile()
	if err != nil {
		panic(err)
	}
	runner, err := flow.NewRunner(compiled, inmem.Open(store.Options{}), flow.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, _ := runner.Invoke(ctx, "doc-1", nil)
	fmt.Println(res.StopReason, string(res.Interrupt), res.Progress.Steps)
	res, _ = runner.Resume(ctx, "doc-1", true)
	fmt.Println(res.StopReason, res.State)
	// Output:
	// interrupt "publish the last draft?" 3
	// success {"approved":true,"drafts":["draft 1","draft 2","draft 3"]}
}

// Stream yields a run's events as they happen, in the modes asked for,
// then its result; nodes send their own with Emit.
func ExampleRunner_Stream() {
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend))
	step := func(name string) flow.NodeFunc {
		return func(ctx context.Context, d state.Doc) (state.Update, error) {
			_ = flow.Emit(ctx, "working on "+name)
			return state.Update{"log": name}, nil
		}
	}
	g, _ := flow.NewGraph(schema).AddNode("draft", step("draft")).AddNode("review", step("review")).Chain("draft", "review").Compile()
	r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	modes := []flow.StreamMode{flow.StreamUpdates, flow.StreamCustom}
	for ev, err := range r.Stream(context.Background(), "thread-1", nil, flow.StreamOptions{Modes: modes}) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ev.Kind == flow.EventResult:
			fmt.Println("result:", ev.Result.StopReason, ev.Result.State)
		default:
			fmt.Println(ev.Kind, ev.Node, string(ev.Payload))
		}
	}
	// Output:
	// custom draft "working on draft"
	// update draft {"log":"draft"}
	// custom review "working on review"
	// update review {"log":"review"}
	// result: success {"log":["draft","review"]}
}

// A subgraph with a pause of its own: the parent stops where the child
// pauses, and Resume goes on inside the child.
func ExampleGraph_AddSubgraph() {
	child, err := flow.NewGraph(state.MustSchema(state.WithField("report", state.ReducerReplace))).
		AddNode("check", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"report": "checked"}, nil }).
		AddNode("publish", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"report": "published"}, nil
		}).
		AddEdge(flow.START, "check").AddEdge("check", "publish").Compile()
	if err != nil {
		panic(err)
	}
	parent, err := flow.NewGraph(state.MustSchema(state.WithField("report", state.ReducerReplace))).
		AddSubgraph("review", child, flow.SubgraphOptions{InterruptBefore: []string{"publish"},
			Output: func(_ context.Context, c state.Doc) (state.Update, error) {
				var r string
				_ = c.Get("report", &r)
				return state.Update{"report": r}, nil
			}}).
		AddEdge(flow.START, "review").Compile()
	if err != nil {
		panic(err)
	}
	fmt.Println(len(parent.Subgraphs()))
	runner, err := flow.NewRunner(parent, inmem.Open(store.Options{}), flow.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, _ := runner.Invoke(ctx, "doc-1", nil)
	fmt.Println(res.StopReason)
	res, _ = runner.Resume(ctx, "doc-1", nil)
	fmt.Println(res.StopReason, res.State)
	// Output:
	// 1
	// interrupt
	// success {"report":"published"}
}
