package agent_test

import (
	"context"
	"encoding/json"
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

// TestCallRecordsStayFlat: a conversation that grows by a turn per run
// records each model call as what changed, so the bytes of the call
// records per turn do not grow with the conversation; a message past the
// bound is cut with a marker.
func TestCallRecordsStayFlat(t *testing.T) {
	ctx := context.Background()
	m, err := scripted.Parse("chat", []byte("replies:\n  - echo_user: \"You said: {user}. \"\n    pad_to: 200\n    repeat: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("conv", state.ReducerAppend))
	g, err := flow.NewGraph(schema).AddNode("agent", func(ctx context.Context, d state.Doc) (state.Update, error) {
		var conv []agent.Message
		if err := d.Get("conv", &conv); err != nil {
			return nil, err
		}
		msgs := append([]agent.Message{{Role: agent.RoleSystem, Content: "Answer briefly."}}, conv...)
		resp, err := agent.Generate(ctx, m, agent.Request{Messages: msgs})
		if err != nil {
			return nil, err
		}
		resp.Message.Role = agent.RoleAssistant
		return state.Update{"conv": []any{resp.Message}}, nil
	}).AddEdge(flow.START, "agent").Compile()
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const turns = 300
	var sizes []int
	for i := 1; i <= turns; i++ {
		text := fmt.Sprintf("turn %d", i)
		if i == turns {
			text = strings.Repeat("long ", agent.RecordedMessageBytes) // past the bound
		}
		res, err := r.Invoke(ctx, "t", state.Update{"conv": []any{agent.Message{Role: agent.RoleUser, Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := s.Writes(ctx, "t", "", res.Head-1)
		if err != nil || len(ws) != 1 || !strings.HasSuffix(ws[0].Task, "/call/0") {
			t.Fatalf("turn %d: writes %v, %v", i, ws, err)
		}
		sizes = append(sizes, len(ws[0].Update))
		if i == turns {
			var rec agent.ModelCallRecord
			if err := json.Unmarshal(ws[0].Update, &rec); err != nil || !rec.Request.Truncated || rec.Request.Prior != 2*(turns-1) ||
				!strings.Contains(rec.Request.Messages[0].Content, "…[truncated ") || len(mustJSON(rec.Request)) > agent.RecordedMessageBytes+1024 {
				t.Fatalf("the last turn's request record (%d bytes): %.300s", len(mustJSON(rec.Request)), mustJSON(rec.Request))
			}
		}
	}
	first, last := sizes[1], sizes[turns-2] // turns 2 and 299: the same shape, 297 turns apart
	if float64(last)/float64(first) > 1.05 {
		t.Fatalf("call record bytes grew from %d (turn 2) to %d (turn %d)", first, last, turns-1)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
