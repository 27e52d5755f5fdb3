package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A Go program runs a graph on a thread and reads the run's events and
// outcome, without HTTP.
func Example() {
	ctx := context.Background()
	schema := state.MustSchema(state.WithField("greeting", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("greet", func(_ context.Context, s state.Doc) (state.Update, error) {
			var name string
			_ = s.Get("name", &name)
			return state.Update{"greeting": "hello, " + name}, nil
		}).
		AddEdge(flow.START, "greet").Compile()
	if err != nil {
		panic(err)
	}
	svc, err := runs.New(runs.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{&runs.Graph{ID: "greeter", Graph: g}}})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil {
		panic(err)
	}
	defer svc.Close(ctx)

	run, err := svc.Create(ctx, "t1", runs.Request{AssistantID: "greeter", Input: json.RawMessage(`{"name": "Ada"}`),
		IfNotExists: "create", StreamMode: runs.StringList{"updates"}})
	if err != nil {
		panic(err)
	}
	<-run.Done()
	evs, _, _, err := svc.Events(run, run.Record(), 0, 1)(ctx) // every event, from the first
	if err != nil {
		panic(err)
	}
	for _, ev := range evs {
		if ev.Event == "updates" {
			data, _ := svc.EventData(ctx, run.Record().Thread, ev)
			fmt.Printf("%s %s\n", ev.Event, data)
		}
	}
	fmt.Println(run.Record().Status)
	_ = run.Outcome().Write(os.Stdout)
	fmt.Println()
	// Output:
	// updates {"greet":{"greeting":"hello, Ada"}}
	// success
	// {"greeting":"hello, Ada","name":"Ada"}
}

// A request the service refuses is an *Error whose kind says why; nothing
// is stored.
func ExampleService_Create_refused() {
	ctx := context.Background()
	svc, err := runs.New(runs.Config{Store: inmem.Open(store.Options{})})
	if err != nil {
		panic(err)
	}
	_, err = svc.Create(ctx, "t1", runs.Request{AssistantID: "nobody", IfNotExists: "create"})
	fmt.Println(errors.Is(err, runs.ErrNotFound), err)
	_, err = svc.Create(ctx, "t1", runs.Request{})
	var re *runs.Error
	fmt.Println(errors.Is(err, runs.ErrInvalidInput), errors.As(err, &re) && re.Path == "$.assistant_id")
	// Output:
	// true No assistant found for "nobody". Make sure the assistant ID is for a valid assistant or a valid graph ID (have ).
	// true true
}

// A graph factory builds the graph each run runs from the run's config, as
// LangGraph's graph factories do.
func ExampleGraph_factory() {
	ctx := context.Background()
	schema := state.MustSchema(state.WithField("said", state.ReducerReplace))
	voice := &runs.Graph{ID: "voice", Factory: func(_ context.Context, rc flow.RunConfig) (*flow.Compiled, error) {
		word, _ := rc.Configurable["word"].(string)
		return flow.NewGraph(schema).
			AddNode("say", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"said": word}, nil }).
			AddEdge(flow.START, "say").Compile()
	}}
	svc, err := runs.New(runs.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{voice}})
	if err != nil {
		panic(err)
	}
	defer svc.Close(ctx)
	run, err := svc.Create(ctx, "", runs.Request{AssistantID: "voice", Input: json.RawMessage(`{}`),
		Config: &runs.RunConfig{Configurable: map[string]any{"word": "hello"}}})
	if err != nil {
		panic(err)
	}
	<-run.Done()
	_ = run.Outcome().Write(os.Stdout)
	fmt.Println()
	// Output:
	// {"said":"hello"}
}

// An assistant made from a served graph carries its own config; each
// update is a new version.
func ExampleService_CreateAssistant() {
	ctx := context.Background()
	g, err := flow.NewGraph(state.MustSchema(state.WithField("x", state.ReducerReplace))).
		AddNode("n", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"x": 1}, nil }).
		AddEdge(flow.START, "n").Compile()
	if err != nil {
		panic(err)
	}
	svc, err := runs.New(runs.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{&runs.Graph{ID: "g", Graph: g}}})
	if err != nil {
		panic(err)
	}
	a, err := svc.CreateAssistant(ctx, runs.AssistantCreate{AssistantID: "g-fast", GraphID: "g", Config: map[string]any{"configurable": map[string]any{"model": "small"}}})
	if err != nil {
		panic(err)
	}
	if _, err := svc.PatchAssistant(ctx, a.AssistantID, runs.AssistantPatch{Metadata: map[string]any{"team": "search"}}); err != nil {
		panic(err)
	}
	vs, _ := svc.AssistantVersions(ctx, "g-fast", nil, 10, 0)
	for _, v := range vs {
		fmt.Println(v.Version, v.Config["configurable"], v.Metadata)
	}
	// Output:
	// 2 map[model:small] map[team:search]
	// 1 map[model:small] map[]
}
