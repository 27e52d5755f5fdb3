package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

func script(t *testing.T, src string) *scripted.Model {
	t.Helper()
	m, err := scripted.Parse(t.Name()+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func runNetwork(t *testing.T, n *agent.Network, s store.Store, thread, input string) (flow.Result, error) {
	t.Helper()
	g, err := n.Graph(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Invoke(context.Background(), thread, agent.Input(input))
}

func results(t *testing.T, d state.Doc) []agent.InferenceResult {
	t.Helper()
	var rs []agent.InferenceResult
	if err := d.Get(agent.FieldResults, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestCodingNetwork is seed 004: a network of agents chosen by a code
// router; the coder's write_files tool keeps files in the key-value store.
func TestCodingNetwork(t *testing.T) {
	model := script(t, `replies:
  - step: planner
    text: "Plan: write main.go that prints hello."
  - step: coder
    tool_calls:
      - name: write_files
        args: {files: [{filename: main.go, content: "package main\nfunc main() { println(\"hello\") }"}]}
  - step: coder
    text: "main.go is written."
`)
	planner := &agent.Agent{Name: "planner", Description: "plans the work", System: "You plan.", Model: model}
	coder := &agent.Agent{Name: "coder", Description: "writes code", System: "You write code.", Model: model, Tools: []agent.Tool{writeFiles(t)}}
	var seen []int
	n := &agent.Network{Name: "coding", Agents: []*agent.Agent{planner, coder}, Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		seen = append(seen, v.CallCount)
		switch {
		case v.CallCount == 0:
			return []string{"planner"}, nil
		case v.KV.Has("files"):
			return nil, nil
		default:
			return []string{"coder"}, nil
		}
	}}
	s := inmem.Open(store.Options{})
	res, err := runNetwork(t, n, s, "net-1", "Write a hello world program")
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("%+v %v", res, err)
	}
	rs := results(t, res.State)
	if len(rs) != 2 || rs[0].Agent != "planner" || rs[1].Agent != "coder" || len(rs[1].ToolCalls) != 1 || rs[1].Usage.Input == 0 {
		t.Fatalf("results %+v", rs)
	}
	if rs[1].Output[len(rs[1].Output)-1].Content != "main.go is written." || rs[0].Input != "Write a hello world program" {
		t.Fatalf("coder output %+v", rs[1].Output)
	}
	kv := state.NewKV(res.State)
	var files map[string]string
	if ok, _ := kv.Get("files", &files); !ok || !strings.Contains(files["main.go"], "hello") {
		t.Fatalf("files %v", files)
	}
	var msgs []agent.Message
	if err := res.State.Get(agent.FieldMessages, &msgs); err != nil {
		t.Fatal(err)
	}
	roles := ""
	for _, m := range msgs {
		roles += string(m.Role)[:1]
	}
	if roles != "uaata" {
		t.Fatalf("message roles %s", roles)
	}
	if fmt.Sprint(seen) != "[0 1 2]" {
		t.Fatalf("router saw call counts %v", seen)
	}
	// Every model call and tool round was its own step.
	steps := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "net-1"}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(cp.Nodes) == 1 && cp.Nodes[0] == "model" {
			steps++
		}
	}
	if steps != 3 {
		t.Fatalf("%d model steps, want 3", steps)
	}
	// A second run on the same thread keeps the history and results.
	model2 := script(t, "replies:\n  - step: planner\n    text: nothing left to plan\n")
	planner.Model, coder.Model = model2, model2
	n.Router = func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		if v.CallCount == 0 {
			return []string{"planner"}, nil
		}
		return nil, nil
	}
	res, err = runNetwork(t, n, s, "net-1", "anything else?")
	if err != nil || len(results(t, res.State)) != 3 {
		t.Fatalf("second run: %v, %d results", err, len(results(t, res.State)))
	}
}

func TestRoutingAgent(t *testing.T) {
	router := script(t, `replies:
  - tool_calls: [{name: select_agent, args: {name: researcher}}]
  - tool_calls: [{name: select_agent, args: {name: writer}}]
  - tool_calls: [{name: done}]
`)
	workers := script(t, "replies:\n  - step: researcher\n    text: facts\n  - step: writer\n    text: essay\n")
	n := &agent.Network{Name: "routed", DefaultModel: router, Agents: []*agent.Agent{
		{Name: "researcher", Description: "finds facts", Model: workers},
		{Name: "writer", Description: "writes", Model: workers},
	}}
	res, err := runNetwork(t, n, inmem.Open(store.Options{}), "r", "write an essay")
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, res.State)
	if len(rs) != 2 || rs[0].Agent != "researcher" || rs[1].Agent != "writer" || res.Progress.Tokens.Input == 0 {
		t.Fatalf("results %+v tokens %+v", rs, res.Progress.Tokens)
	}
}

func TestNetworkHooksAndErrors(t *testing.T) {
	m := script(t, "replies:\n  - step: a\n    text: from a\n")
	var started, finished int
	a := &agent.Agent{Name: "a", Model: m, Hooks: agent.Hooks{
		OnStart: func(ctx context.Context, v agent.NetworkView, p *agent.Prompt) (bool, error) {
			started++
			p.System = "changed by the hook"
			return false, nil
		},
		OnFinish: func(ctx context.Context, v agent.NetworkView, r *agent.InferenceResult) error {
			finished++
			if r.Prompt[0].Content != "changed by the hook" {
				t.Errorf("prompt %+v", r.Prompt)
			}
			return nil
		},
	}}
	b := &agent.Agent{Name: "b", Model: m, Hooks: agent.Hooks{Enabled: func(context.Context, agent.NetworkView) bool { return false }}}
	once := func(name string) agent.Router {
		return func(ctx context.Context, v agent.NetworkView) ([]string, error) {
			if v.CallCount == 0 {
				return []string{name}, nil
			}
			return nil, nil
		}
	}
	n := &agent.Network{Name: "hooks", Agents: []*agent.Agent{a, b}, Router: once("a")}
	if _, err := runNetwork(t, n, inmem.Open(store.Options{}), "h", "go"); err != nil || started != 1 || finished != 1 {
		t.Fatalf("hooks: %v started %d finished %d", err, started, finished)
	}
	n.Router = once("b")
	if _, err := runNetwork(t, n, inmem.Open(store.Options{}), "h2", "go"); !errors.Is(err, agent.ErrNoAgents) {
		t.Fatalf("disabled agent: %v", err)
	}
	n.Router = once("zed")
	if _, err := runNetwork(t, n, inmem.Open(store.Options{}), "h3", "go"); !errors.Is(err, agent.ErrUnknownAgent) {
		t.Fatalf("unknown agent: %v", err)
	}
	a.Hooks.Enabled = func(context.Context, agent.NetworkView) bool { return false }
	if _, err := runNetwork(t, n, inmem.Open(store.Options{}), "h4", "go"); !errors.Is(err, agent.ErrNoAgents) || !strings.Contains(err.Error(), "no agents enabled in network") {
		t.Fatalf("none enabled: %v", err)
	}
	// Max iterations stops a router that never stops.
	loop := script(t, "replies:\n  - step: c\n    text: one\n  - step: c\n    text: two\n  - step: c\n    text: three\n")
	c := &agent.Agent{Name: "c", Model: loop}
	n2 := &agent.Network{Name: "loop", Agents: []*agent.Agent{c}, MaxIter: 2, Router: func(context.Context, agent.NetworkView) ([]string, error) { return []string{"c"}, nil }}
	res, err := runNetwork(t, n2, inmem.Open(store.Options{}), "l", "go")
	if err != nil || len(results(t, res.State)) != 2 {
		t.Fatalf("max iter: %v", err)
	}
	if _, err := (&agent.Network{Name: "empty"}).Graph(nil); !errors.Is(err, agent.ErrNoAgents) {
		t.Fatalf("empty network: %v", err)
	}
}
