package agent_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Structured output: the reply is checked against a schema; text around
// the JSON object is tolerated.
func ExampleGenerateStructured() {
	schema, _ := agent.SchemaFromJSON("City", []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`))
	model, _ := scripted.Parse("city.yaml", []byte("replies:\n  - text: 'Sure! {\"city\": \"Berlin\"} Anything else?'\n"))
	res, err := agent.GenerateStructured(context.Background(), model,
		agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Where is Acme based?"}}}, schema, 2)
	fmt.Println(string(res.Value), err)
	// Output: {"city":"Berlin"} <nil>
}

// A network of two agents chosen by a code router, run durably by the flow
// runner: every model call and tool round is a committed step.
func ExampleNetwork() {
	model, _ := scripted.Parse("team.yaml", []byte(`replies:
  - step: researcher
    text: "Acme was founded in 1949."
  - step: writer
    text: "Acme, founded in 1949, makes anvils."
`))
	order := []string{"researcher", "writer"}
	n := &agent.Network{
		Name: "team",
		Agents: []*agent.Agent{
			{Name: "researcher", System: "Find facts.", Model: model},
			{Name: "writer", System: "Write one sentence.", Model: model},
		},
		Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
			if v.CallCount < len(order) {
				return order[v.CallCount : v.CallCount+1], nil
			}
			return nil, nil // stop
		},
	}
	g, _ := n.Graph(nil)
	runner, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	res, err := runner.Invoke(context.Background(), "acme", agent.Input("Write about Acme"))
	if err != nil {
		panic(err)
	}
	var results []agent.InferenceResult
	_ = res.State.Get(agent.FieldResults, &results)
	for _, r := range results {
		fmt.Printf("%s: %s\n", r.Agent, r.Output[0].Content)
	}
	fmt.Println(res.StopReason)
	// Output:
	// researcher: Acme was founded in 1949.
	// writer: Acme, founded in 1949, makes anvils.
	// success
}

// Tools read and write the run's key-value store.
func ExampleRunTools() {
	type noteArgs struct {
		Text string `json:"text"`
	}
	note, _ := agent.NewTool("note", "Remember a note", func(ctx context.Context, tc agent.ToolContext, a noteArgs) (any, error) {
		return "saved", tc.KV.Set("note", a.Text)
	})
	model, _ := scripted.Parse("notes.yaml", []byte("replies:\n  - tool_calls: [{name: note, args: {text: buy milk}}]\n  - text: Noted.\n"))
	kv := state.NewKV(state.EmptyDoc())
	res, err := agent.RunTools(context.Background(), model, agent.Request{}, []agent.Tool{note}, agent.LoopOptions{Context: agent.ToolContext{KV: kv}})
	var saved string
	_, _ = kv.Get("note", &saved)
	fmt.Println(res.Final.Content, saved, err)
	// Output: Noted. buy milk <nil>
}

// A program that runs a reply's tool calls itself runs them one by one;
// a failure comes back in the result, for the model to read.
func ExampleRunTool() {
	type addArgs struct {
		A, B int
	}
	add, _ := agent.NewTool("add", "Add two numbers", func(ctx context.Context, tc agent.ToolContext, x addArgs) (any, error) {
		return x.A + x.B, nil
	})
	tools := []agent.Tool{add}
	ok := agent.RunTool(context.Background(), tools, agent.ToolCall{ID: "c1", Name: "add", Args: []byte(`{"A": 2, "B": 3}`)}, agent.ToolContext{Key: "t/1/tools/0"})
	bad := agent.RunTool(context.Background(), tools, agent.ToolCall{ID: "c2", Name: "mul"}, agent.ToolContext{})
	fmt.Println(string(ok.Output), bad.Error)
	// Output: 5 agent: unknown tool "mul"
}
