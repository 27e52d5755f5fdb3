package flow_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/memory"
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
	runner, err := flow.NewRunner(compiled, memory.Open(store.Options{}), flow.Options{})
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
