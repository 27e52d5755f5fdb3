package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// TestLangGraphSDKGoGraphs runs server/sdktest/graphs.test.mjs, written
// with the official LangGraph JS SDK, against the server package serving
// Go graphs on SQLite, inside a program with a route of its own (as a Go
// program embeds the API): a tool-calling agent over a messages field,
// a router whose subgraph pauses inside, and a graph factory. It covers what only a Go
// graph shows: LangGraph's input checkpoint before a run's first step,
// a pause that rides on its step, message shapes and ids, a subgraph's
// own state read and updated at its pause, typed subgraph schemas, and a
// webhook to the program's own route; and a graph built per run from its
// config, whose node reads the run's config and context.
func TestLangGraphSDKGoGraphs(t *testing.T) {
	node, dir := sdkSuite(t)
	var mu sync.Mutex
	var last json.RawMessage
	mux := http.NewServeMux()
	mux.HandleFunc("POST /custom/hook", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = b
		mu.Unlock()
	})
	mux.HandleFunc("GET /custom/last", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if last == nil {
			_, _ = w.Write([]byte("null"))
			return
		}
		_, _ = w.Write(last)
	})
	addr := serveGoGraphs(t, "graphs.db", mux, toolAgent(t), weatherRouter(t), configuredGraph())
	runNode(t, node, dir, []string{"CAIRN_URL=" + addr}, "--test", "graphs.test.mjs")
}

// serveGoGraphs serves Go graphs with the server package on a fresh
// SQLite store, inside a program whose own routes are mux's (nil: none;
// the program's address is the server's BaseURL, so that a webhook that
// is a path reaches them); it returns the program's URL.
func serveGoGraphs(t *testing.T, db string, mux *http.ServeMux, as ...runs.Assistant) string {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), db), store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if mux == nil {
		mux = http.NewServeMux()
	}
	var api http.Handler
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.ServeHTTP(w, r) }))
	hs := httptest.NewUnstartedServer(mux)
	base, _ := url.Parse("http://" + hs.Listener.Addr().String())
	srv, err := server.New(server.Config{Store: s, Assistants: as, BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	api = srv
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs.URL
}

// toolAgent is LangGraph's test agent in Go: agent answers "begin" with
// a tool call, tool answers the call, agent then ends with "end"; the
// messages carry no ids of their own.
func toolAgent(t *testing.T) *runs.Graph {
	t.Helper()
	last := func(d state.Doc) map[string]any {
		var msgs []map[string]any
		_ = d.Get("messages", &msgs)
		if len(msgs) == 0 {
			return nil
		}
		return msgs[len(msgs)-1]
	}
	g, err := flow.NewGraph(state.MustSchema(state.WithField("messages", state.ReducerMessages))).
		AddNode("agent", func(_ context.Context, d state.Doc) (state.Update, error) {
			if m := last(d); m != nil && m["type"] == "tool" {
				return state.Update{"messages": []any{map[string]any{"type": "ai", "content": "end"}}}, nil
			}
			call := map[string]any{"id": "tool_call_id", "name": "tool", "args": map[string]any{}}
			return state.Update{"messages": []any{map[string]any{"type": "ai", "content": "begin", "tool_calls": []any{call}}}}, nil
		}).
		AddNode("tool", func(_ context.Context, d state.Doc) (state.Update, error) {
			return state.Update{"messages": []any{map[string]any{"type": "tool", "content": "tool_call__" + last(d)["content"].(string), "tool_call_id": "tool_call_id"}}}, nil
		}).
		AddEdge(flow.START, "agent").
		AddRouter("agent", func(_ context.Context, d state.Doc) ([]flow.Target, error) {
			if calls, _ := last(d)["tool_calls"].([]any); len(calls) > 0 {
				return flow.To("tool"), nil
			}
			return flow.To(flow.END), nil
		}).
		AddEdge("tool", "agent").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "agent", Graph: g}
}

// weatherRouter routes to weather_graph, a subgraph that pauses before
// its weather_node; the subgraph's city is typed as an enum.
func weatherRouter(t *testing.T) *runs.Graph {
	t.Helper()
	weather, err := flow.NewGraph(state.MustSchema(state.WithField("city", state.ReducerReplace), state.WithField("report", state.ReducerReplace))).
		AddNode("model_node", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"city": "San Francisco"}, nil
		}).
		AddNode("weather_node", func(_ context.Context, d state.Doc) (state.Update, error) {
			var city string
			_ = d.Get("city", &city)
			return state.Update{"report": "It's sunny in " + city + "!"}, nil
		}).
		AddEdge(flow.START, "model_node").AddEdge("model_node", "weather_node").Compile()
	if err != nil {
		t.Fatal(err)
	}
	router, err := flow.NewGraph(state.MustSchema(state.WithField("route", state.ReducerReplace), state.WithField("report", state.ReducerReplace))).
		AddNode("router_node", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"route": "weather"}, nil }).
		AddSubgraph("weather_graph", weather, flow.SubgraphOptions{InterruptBefore: []string{"weather_node"},
			Output: func(_ context.Context, child state.Doc) (state.Update, error) {
				var r string
				_ = child.Get("report", &r)
				return state.Update{"report": r}, nil
			}}).
		AddEdge(flow.START, "router_node").AddEdge("router_node", "weather_graph").Compile()
	if err != nil {
		t.Fatal(err)
	}
	city := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"San Francisco", "LA"}}}}
	return &runs.Graph{ID: "weather", Graph: router, Types: runs.GraphTypes{Subgraphs: map[string]runs.GraphTypes{"weather_graph": {State: city}}}}
}

// configuredGraph is built per run from its config (a graph factory):
// its one node is named by configurable.node_name, and greets the user
// its config names (configurable.user_id) of the org its context names.
func configuredGraph() *runs.Graph {
	factory := func(_ context.Context, rc flow.RunConfig) (*flow.Compiled, error) {
		name, _ := rc.Configurable["node_name"].(string)
		if name == "" {
			name = "greet"
		}
		return flow.NewGraph(state.MustSchema(state.WithField("greeting", state.ReducerReplace))).
			AddNode(name, func(ctx context.Context, _ state.Doc) (state.Update, error) {
				user, _ := flow.RunConfigOf(ctx).Configurable["user_id"].(string)
				c, _, err := flow.ContextAs[struct {
					Org string `json:"org"`
				}](ctx)
				if err != nil {
					return nil, err
				}
				return state.Update{"greeting": "hello " + user + " of " + c.Org + " from " + name}, nil
			}).
			AddEdge(flow.START, name).Compile()
	}
	return &runs.Graph{ID: "configured", Factory: factory}
}

// TestLangGraphSDKProtocol runs server/sdktest/protocol.test.mjs: the
// official JS SDK's thread-centric client (client.threads.stream()) on
// Go graphs — a tool-calling agent and a router whose subgraph pauses
// inside — served by the server package.
func TestLangGraphSDKProtocol(t *testing.T) {
	node, dir := sdkSuite(t)
	addr := serveGoGraphs(t, "protocol.db", nil, toolAgent(t), weatherRouter(t))
	runNode(t, node, dir, []string{"CAIRN_URL=" + addr}, "--test", "protocol.test.mjs")
}
