package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

const streamScript = `replies:
  - tool_calls: [{name: lookup, args: {sku: A-17, warehouse: north-east}}]
  - text: "In stock: twelve units of A-17."
    chunk_delay_ms: 1
`

// A tool loop in a node streams its model's replies, chunk by chunk, to a
// flow stream in messages mode; the step commits the complete messages.
func TestMessagesStream(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		name := "scripted"
		if wrapped {
			name = "through WithRetry"
		}
		t.Run(name, func(t *testing.T) {
			sm, err := scripted.Parse("s.yaml", []byte(streamScript))
			if err != nil {
				t.Fatal(err)
			}
			var m agent.Model = sm
			if wrapped {
				m = agent.WithRetry(sm, agent.RetryPolicy{})
			}
			lookup, _ := agent.NewTool("lookup", "", func(ctx context.Context, tc agent.ToolContext, a struct {
				SKU string `json:"sku"`
			}) (any, error) {
				return "12", nil
			})
			g, _ := flow.NewGraph(state.MustSchema(state.WithField("messages", state.ReducerMessages))).
				AddNode("clerk", func(ctx context.Context, d state.Doc) (state.Update, error) {
					res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "A-17?"}}}, []agent.Tool{lookup}, agent.LoopOptions{})
					if err != nil {
						return nil, err
					}
					return state.Update{"messages": res.Final}, nil
				}).Chain("clerk").Compile()
			r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
			var text, args strings.Builder
			ids := map[string]int{}
			var final *flow.Result
			for ev, err := range r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamMessages}}) {
				if err != nil {
					t.Fatal(err)
				}
				if ev.Kind == flow.EventResult {
					final = ev.Result
					continue
				}
				var c agent.MessageChunk
				if ev.Kind != flow.EventMessage || ev.Node != "clerk" || json.Unmarshal(ev.Payload, &c) != nil {
					t.Fatalf("event %+v", ev)
				}
				ids[c.ID]++
				text.WriteString(c.Text)
				if c.ToolCall != nil {
					args.WriteString(c.ToolCall.Args)
				}
			}
			if text.String() != "In stock: twelve units of A-17." || args.String() != `{"sku":"A-17","warehouse":"north-east"}` {
				t.Fatalf("streamed text %q, args %q", text.String(), args.String())
			}
			if len(ids) != 2 || ids["t/1/clerk/model/0"] == 0 || ids["t/1/clerk/model/1"] < 6 {
				t.Fatalf("chunks per call %v", ids)
			}
			var msgs []agent.Message
			if final == nil || final.State.Get("messages", &msgs) != nil || len(msgs) != 1 || msgs[0].Content != text.String() {
				t.Fatalf("committed %+v", msgs)
			}
		})
	}
}

// Without a stream in messages mode the model is not asked to stream.
func TestNoStreamNoChunks(t *testing.T) {
	sm, _ := scripted.Parse("s.yaml", []byte("replies:\n  - text: hi\n"))
	g, _ := flow.NewGraph(state.MustSchema()).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
		if flow.Streaming(ctx, flow.StreamMessages) {
			t.Error("streaming outside a messages stream")
		}
		resp, err := sm.Generate(ctx, agent.Request{})
		return state.Update{"r": resp.Message.Content}, err
	}).Chain("n").Compile()
	r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	for ev, err := range r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamUpdates}}) {
		if err != nil || ev.Kind == flow.EventMessage {
			t.Fatalf("%+v %v", ev, err)
		}
	}
}
