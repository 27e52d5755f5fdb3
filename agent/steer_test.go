package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// steerModel calls tool note, then tool wait, then answers; it keeps the
// user messages of each request.
type steerModel struct {
	mu   sync.Mutex
	seen [][]string
}

func (m *steerModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return agent.Response{}, err
	}
	round := 0
	var users []string
	for _, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleAssistant:
			round++
		case agent.RoleUser:
			users = append(users, msg.Content)
		}
	}
	m.mu.Lock()
	m.seen = append(m.seen, users)
	m.mu.Unlock()
	msg := agent.Message{Role: agent.RoleAssistant}
	switch round {
	case 0:
		msg.ToolCalls = []agent.ToolCall{{ID: "a", Name: "note", Args: json.RawMessage(`{}`)}}
	case 1:
		msg.ToolCalls = []agent.ToolCall{{ID: "b", Name: "wait", Args: json.RawMessage(`{}`)}}
	default:
		msg.Content = "done after " + strings.Join(users, " / ")
	}
	return agent.Response{Message: msg}, nil
}

// TestToolLoopTakesSteers: a message sent while a tool loop runs inside
// one node is added before the loop's next model call, and the node's
// update carries it. A crash later in the step (its run cancelled:
// nothing commits) leaves it pending; the rerun replays it from the
// step's journal at the same call — not taken before the step, not
// twice — and the step's checkpoint records it consumed.
func TestToolLoopTakesSteers(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	ib, err := store.InboxOf(s)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var once sync.Once
	note, _ := agent.NewTool("note", "note", func(ctx context.Context, _ agent.ToolContext, _ struct{}) (any, error) {
		_, err := ib.Append(ctx, "t", 0, store.InboxSteer, json.RawMessage(`"also check the date"`))
		return "noted", err
	})
	wait, _ := agent.NewTool("wait", "wait", func(ctx context.Context, _ agent.ToolContext, _ struct{}) (any, error) {
		blocked := false
		once.Do(func() { blocked = true; close(first) })
		if blocked {
			<-ctx.Done() // the first attempt is cut off here
			return nil, ctx.Err()
		}
		return "waited", nil
	})
	m := &steerModel{}
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	g, err := flow.NewGraph(schema).AddNode("loop", func(ctx context.Context, d state.Doc) (state.Update, error) {
		res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}}, []agent.Tool{note, wait}, agent.LoopOptions{})
		if err != nil {
			return nil, err
		}
		var out []state.Message
		for _, msg := range res.Messages {
			typ := map[agent.Role]string{agent.RoleUser: "human", agent.RoleAssistant: "ai", agent.RoleTool: "tool"}[msg.Role]
			out = append(out, state.Message{Type: typ, Content: msg.Content})
		}
		return state.Update{"messages": out}, nil
	}).AddEdge(flow.START, "loop").AddEdge("loop", flow.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRunner(g, s, flow.Options{Inbox: ib, SteerInside: []string{"loop"}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-first; cancel() }()
	if _, err := r.Invoke(cctx, "t", state.Update{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v", err)
	}
	if head, _ := s.Load(ctx, store.LoadRequest{Thread: "t"}); head.Meta.Usage != nil && head.Meta.Usage.Inbox != 0 {
		t.Fatalf("consumed by a step that did not commit: %+v", head.Meta.Usage)
	}
	res, err := r.Resume(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Live calls: rounds 0 and 1 of the first attempt (1 with the steer),
	// then only round 2 after the crash, which sees it once.
	if len(m.seen) != 3 || strings.Join(m.seen[0], "|") != "go" || strings.Join(m.seen[1], "|") != "go|also check the date" || strings.Join(m.seen[2], "|") != "go|also check the date" {
		t.Fatalf("model requests' user messages: %q", m.seen)
	}
	var msgs []state.Message
	if err := res.State.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, msg := range msgs {
		got = append(got, msg.Type+":"+msg.Content)
	}
	if want := "ai:|tool:\"noted\"|human:also check the date|ai:|tool:\"waited\"|ai:done after go / also check the date"; strings.Join(got, "|") != want {
		t.Fatalf("messages:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil || head.Meta.Usage == nil || head.Meta.Usage.Inbox != 1 {
		t.Fatalf("head usage %+v, %v", head.Meta.Usage, err)
	}
}
