package flow_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A node reads what its run was configured with: config.configurable and
// the run's context, as a LangGraph node reads config and runtime.context.
func ExampleContextAs() {
	type userContext struct {
		UserID string `json:"user_id"`
	}
	schema := state.MustSchema(state.WithField("greeting", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("greet", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			uc, _, err := flow.ContextAs[userContext](ctx)
			if err != nil {
				return nil, err
			}
			model, _ := flow.RunConfigOf(ctx).Configurable["model_name"].(string)
			return state.Update{"greeting": fmt.Sprintf("hello %s, from %s", uc.UserID, model)}, nil
		}).
		AddEdge(flow.START, "greet").Compile()
	if err != nil {
		panic(err)
	}
	runner, err := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	if err != nil {
		panic(err)
	}
	ctx := flow.WithRunConfig(context.Background(), flow.RunConfig{
		Configurable: map[string]any{"model_name": "small"},
		Context:      json.RawMessage(`{"user_id": "ada"}`),
	})
	res, err := runner.Invoke(ctx, "t1", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State)
	// Output:
	// {"greeting":"hello ada, from small"}
}
