package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A Go graph served over the LangGraph API: a client creates a thread and
// waits for a run's outcome.
func ExampleNew() {
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
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{&runs.Graph{ID: "greeter", Graph: g}}})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())
	hs := httptest.NewServer(srv)
	defer hs.Close()

	post := func(path, body string) string {
		res, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return strings.TrimSpace(string(b))
	}
	post("/threads", `{"thread_id": "t1"}`)
	fmt.Println(post("/threads/t1/runs/wait", `{"assistant_id": "greeter", "input": {"name": "Ada"}}`))
	// Output: {"greeting":"hello, Ada","name":"Ada"}
}
