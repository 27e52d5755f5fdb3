package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// weather is a Go graph: "plan" asks the model for a city, "act" looks
// its weather up with a tool, building the tool's arguments with spell.
func weather(spell func(string) string) *runs.Graph { return weatherAsking("Which city?", spell) }

// weatherAsking is weather whose plan asks question.
func weatherAsking(question string, spell func(string) string) *runs.Graph {
	m, err := scripted.Parse("weather", []byte("replies:\n  - text: Paris\n    repeat: true\n"))
	if err != nil {
		panic(err)
	}
	lookup, err := agent.NewTool("lookup", "The weather of a city", func(_ context.Context, _ agent.ToolContext, a struct {
		City string `json:"city"`
	}) (any, error) {
		return "sunny in " + a.City, nil
	})
	if err != nil {
		panic(err)
	}
	schema := state.MustSchema(state.WithField("city", state.ReducerReplace), state.WithField("weather", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("plan", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			resp, err := agent.Generate(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: question}}})
			return state.Update{"city": resp.Message.Content}, err
		}).
		AddNode("act", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var city string
			_ = d.Get("city", &city)
			args, _ := json.Marshal(map[string]string{"city": spell(city)})
			tr := agent.RunTool(ctx, []agent.Tool{lookup}, agent.ToolCall{ID: "1", Name: "lookup", Args: args}, agent.ToolContext{})
			var out string
			_ = json.Unmarshal(tr.Output, &out)
			return state.Update{"weather": out}, nil
		}).
		AddEdge(flow.START, "plan").AddEdge("plan", "act").Compile()
	if err != nil {
		panic(err)
	}
	return &runs.Graph{ID: "weather", Graph: g}
}

// A thread recorded with one version of a graph is replayed with the same
// code (it matches) and with a version that builds the tool's arguments
// differently: the report names the step and the call, with the
// difference of the two requests. The model and the tool are not called.
func Example() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	asIs := func(c string) string { return c }
	if _, err := weather(asIs).Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`)}); err != nil {
		panic(err)
	}

	rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: weather(asIs)})
	if err != nil {
		panic(err)
	}
	fmt.Println("same code:", rep.Matched, rep.Checkpoints, "checkpoints,", rep.Calls, "calls answered")

	rep, err = replay.Thread(ctx, s, "t1", replay.Options{Assistant: weather(strings.ToLower)})
	if err != nil {
		panic(err)
	}
	d := rep.Departure
	fmt.Println("changed code:", rep.Matched, "at checkpoint", d.Seq, d.Node)
	fmt.Println(d.Call.Kind, d.Call.Name, d.Call.Reason)
	diff, _ := json.Marshal(d.Call.Diff)
	fmt.Println(string(diff))
	// Output:
	// same code: true 3 checkpoints, 2 calls answered
	// changed code: false at checkpoint 3 act
	// tool tool/lookup the tool call's request differs from the recorded one
	// [{"op":"replace","path":"/args/city","value":"paris"}]
}
