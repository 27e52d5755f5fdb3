package agent_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Routers and lifecycle hooks write the network's key-value store
// (AgentKit's network.state.kv); the writes are committed with the step.
func TestNetworkKVWritesFromRoutersAndHooks(t *testing.T) {
	m := script(t, "replies:\n  - step: a\n    text: from a\n")
	set := func(v agent.NetworkView, key string, val any) {
		if err := v.KV.Set(key, val); err != nil {
			t.Fatal(err)
		}
	}
	a := &agent.Agent{Name: "a", Model: m, Hooks: agent.Hooks{
		Enabled: func(ctx context.Context, v agent.NetworkView) bool { set(v, "enabled_checked", true); return true },
		OnStart: func(ctx context.Context, v agent.NetworkView, p *agent.Prompt) (bool, error) {
			set(v, "started", "a")
			return false, nil
		},
		OnResponse: func(ctx context.Context, v agent.NetworkView, r *agent.InferenceResult) error {
			set(v, "responded", len(r.Output))
			return nil
		},
		OnFinish: func(ctx context.Context, v agent.NetworkView, r *agent.InferenceResult) error {
			set(v, "finished", r.Agent)
			return nil
		},
	}}
	router := func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		var n int
		if _, err := v.KV.Get("routes", &n); err != nil {
			return nil, err
		}
		set(v, "routes", n+1)
		if v.CallCount == 0 {
			return []string{"a"}, nil
		}
		return nil, nil
	}
	s := inmem.Open(store.Options{})
	n := &agent.Network{Name: "kv", Agents: []*agent.Agent{a}, Router: router}
	if _, err := runNetwork(t, n, s, "kv", "go"); err != nil {
		t.Fatal(err)
	}
	head, err := s.Load(context.Background(), store.LoadRequest{Thread: "kv"})
	if err != nil {
		t.Fatal(err)
	}
	kv := state.NewKV(head.State)
	for key, want := range map[string]string{"routes": "2", "enabled_checked": "true", "started": `"a"`, "responded": "1", "finished": `"a"`} {
		var got json.RawMessage
		if ok, err := kv.Get(key, &got); err != nil || !ok || string(got) != want {
			t.Errorf("kv %s = %s (%v, %v), want %s", key, got, ok, err, want)
		}
	}
}

// recorder remembers the messages of every request.
type recorder struct {
	agent.Model
	mu   sync.Mutex
	reqs [][]agent.Message
}

func (r *recorder) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, slices.Clone(req.Messages))
	r.mu.Unlock()
	return r.Model.Generate(ctx, req)
}

// InferenceResult.Prompt is the whole initial message list sent to the
// model (AgentKit), not only the system message.
func TestInferenceResultPrompt(t *testing.T) {
	m := &recorder{Model: script(t, "replies:\n  - step: a\n    text: from a\n  - step: b\n    text: from b\n")}
	a := &agent.Agent{Name: "a", System: "You are a.", Model: m}
	b := &agent.Agent{Name: "b", System: "You are b.", Model: m}
	n := &agent.Network{Name: "p", Agents: []*agent.Agent{a, b}, Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		if v.CallCount == 0 {
			return []string{"a", "b"}, nil
		}
		return nil, nil
	}}
	res, err := runNetwork(t, n, inmem.Open(store.Options{}), "p", "go")
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, res.State)
	if len(rs) != 2 || len(m.reqs) != 2 {
		t.Fatalf("%d results, %d requests", len(rs), len(m.reqs))
	}
	for i, r := range rs {
		got, _ := json.Marshal(r.Prompt)
		want, _ := json.Marshal(m.reqs[i])
		if string(got) != string(want) || len(r.Prompt) != 2+i {
			t.Errorf("result %d prompt %s, sent %s", i, got, want)
		}
	}
}

// shuffled is a provider that gives tool calls new ids on every call, as a
// real one does on a re-run.
type shuffled struct{ calls int }

func (s *shuffled) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	s.calls++
	if s.calls%2 == 0 {
		return agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}}, nil
	}
	id := func() string { return "call_" + rand.Text()[:8] }
	return agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{
		{ID: id(), Name: "effect", Args: json.RawMessage(`{}`)}, {ID: id(), Name: "effect", Args: json.RawMessage(`{}`)},
	}}}, nil
}

// Tool-call keys follow the call's position, not the provider's call id:
// running a step again gives every call the key it had.
func TestToolKeysByPosition(t *testing.T) {
	var keys []string
	effect := agent.Tool{Name: "effect", Handler: func(ctx context.Context, tc agent.ToolContext, _ json.RawMessage) (any, error) {
		keys = append(keys, tc.Key)
		return "ok", nil
	}}
	m := &shuffled{}
	for run := 0; run < 2; run++ {
		_, err := agent.RunTools(context.Background(), m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}},
			[]agent.Tool{effect}, agent.LoopOptions{Context: agent.ToolContext{Key: "t/4/coder"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := "t/4/coder/tool/0.0 t/4/coder/tool/0.1"
	if got := strings.Join(keys, " "); got != want+" "+want {
		t.Fatalf("keys %s, want %s twice", got, want)
	}
	// In a network, the tools step keys its calls the same way.
	keys = nil
	coder := &agent.Agent{Name: "coder", Model: &shuffled{}, Tools: []agent.Tool{effect}}
	n := &agent.Network{Name: "k", Agents: []*agent.Agent{coder}, Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		if v.CallCount == 0 {
			return []string{"coder"}, nil
		}
		return nil, nil
	}}
	if _, err := runNetwork(t, n, inmem.Open(store.Options{}), "k", "go"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, " "); got != "k/3/tools/tool/0.0 k/3/tools/tool/0.1" {
		t.Fatalf("network keys %s", got)
	}
}

// overflowing is a model whose prompt no longer fits.
type overflowing struct{}

func (overflowing) Generate(context.Context, agent.Request) (agent.Response, error) {
	return agent.Response{}, &agent.ProviderError{Provider: "openai", Status: 400, Err: agent.ErrContextOverflow}
}

// A step failing with a context overflow stops the run with stop reason
// context_overflow (any graph: here a network), recorded on the checkpoint.
func TestContextOverflowStopsRun(t *testing.T) {
	a := &agent.Agent{Name: "a", Model: overflowing{}}
	n := &agent.Network{Name: "o", Agents: []*agent.Agent{a}, Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		return []string{"a"}, nil
	}}
	s := inmem.Open(store.Options{})
	res, err := runNetwork(t, n, s, "o", "go")
	if !errors.Is(err, agent.ErrContextOverflow) || res.StopReason != state.StopContextOverflow {
		t.Fatalf("%v, stop %s", err, res.StopReason)
	}
	head, _ := s.Load(context.Background(), store.LoadRequest{Thread: "o"})
	if head.Status != store.StatusFailed || head.Meta.StopReason != string(state.StopContextOverflow) {
		t.Fatalf("head %s %q", head.Status, head.Meta.StopReason)
	}
}
