package flow_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// fixedTape answers every call with the same value.
type fixedTape struct{ answer string }

func (t fixedTape) Answer(_ context.Context, c flow.Call) (json.RawMessage, error) {
	return json.Marshal(t.answer + " (call " + fmt.Sprint(c.Index) + " of " + c.Task.Node + ")")
}

// A node that reaches outside numbers its call (BeginCall), asks the run's
// tape when there is one instead of going out, and records the call
// (RecordCall) in its step's journal for a later replay. Package agent
// does this for every model and tool call.
func ExampleWithTape() {
	schema := state.MustSchema(state.WithField("weather", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			n := flow.BeginCall(ctx)
			answer := json.RawMessage(`"sunny (from the service)"`) // the real call
			if tp := flow.TapeOf(ctx); tp != nil {
				info, _ := flow.Info(ctx)
				var err error
				if answer, err = tp.Answer(ctx, flow.Call{Task: info, Index: n, Kind: "tool", Name: "weather", Request: json.RawMessage(`{"city":"Paris"}`)}); err != nil {
					return nil, err
				}
			}
			if err := flow.RecordCall(ctx, n, map[string]any{"kind": "tool", "name": "weather", "answer": answer}); err != nil {
				return nil, err
			}
			var text string
			_ = json.Unmarshal(answer, &text)
			return state.Update{"weather": text}, nil
		}).
		AddEdge(flow.START, "ask").Compile()
	if err != nil {
		panic(err)
	}
	s := inmem.Open(store.Options{})
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	live, _ := r.Invoke(ctx, "live", state.Update{})
	taped, _ := r.Invoke(flow.WithTape(ctx, fixedTape{"rain"}), "taped", state.Update{})
	var w1, w2 string
	_ = live.State.Get("weather", &w1)
	_ = taped.State.Get("weather", &w2)
	ws, _ := s.Writes(ctx, "live", "", 1)
	fmt.Println(w1)
	fmt.Println(w2)
	fmt.Println(ws[0].Task)
	// Output:
	// sunny (from the service)
	// rain (call 0 of ask)
	// journal/1/live/1/ask/call/0
}
