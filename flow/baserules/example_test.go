package baserules_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A loop over a state that embeds state.Base: with the rules, current_step
// counts the steps and the run stops at max_steps.
func Example() {
	type Research struct {
		state.Base
		Notes []string `json:"notes" cairn:"append"`
	}
	typed, _ := state.NewTyped[Research]()
	g, _ := flow.NewGraph(typed.Schema()).
		AddNode("think", func(ctx context.Context, d state.Doc) (state.Update, error) {
			return state.Update{"notes": "another thought"}, nil
		}).
		AddEdge(flow.START, "think").
		AddEdge("think", "think").
		WithRules(baserules.Rules()).
		Compile()
	r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	res, err := r.Invoke(context.Background(), "research-1", state.Update{"task": "think", "max_steps": 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := typed.Decode(res.State)
	fmt.Println(res.StopReason, s.CurrentStep, len(s.Notes))
	// Output: max_steps 3 3
}
