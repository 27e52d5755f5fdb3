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

// A message sent to a thread's inbox while its run runs is taken before
// the run's next step, through the state's messages reducer; the
// checkpoint of that step records it (Usage.Inbox), so it is taken once.
func ExampleOptions_inbox() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	inbox, _ := store.InboxOf(s)
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	turns := 0
	g, _ := flow.NewGraph(schema).
		AddNode("agent", func(ctx context.Context, d state.Doc) (state.Update, error) {
			turns++
			if turns == 1 { // the user steers while the first turn runs
				_, _ = inbox.Append(ctx, "invoice-1", 0, store.InboxSteer, json.RawMessage(`"also check the invoice date"`))
			}
			n, _ := d.ListLen("messages")
			return state.Update{"messages": state.Message{Type: "ai", Content: fmt.Sprintf("turn %d: %d messages seen", turns, n)}}, nil
		}).
		AddEdge(flow.START, "agent").
		AddRouter("agent", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			if turns < 2 {
				return flow.To("agent"), nil
			}
			return flow.To(flow.END), nil
		}).Compile()
	r, _ := flow.NewRunner(g, s, flow.Options{Inbox: inbox})
	res, _ := r.Invoke(ctx, "invoice-1", state.Update{"messages": state.Message{Type: "human", Content: "extract the invoice"}})
	var msgs []state.Message
	_ = res.State.Get("messages", &msgs)
	for _, m := range msgs {
		fmt.Println(m.Type+":", m.Content)
	}
	head, _ := s.Load(ctx, store.LoadRequest{Thread: "invoice-1"})
	fmt.Println("consumed up to entry", head.Meta.Usage.Inbox)
	// Output:
	// human: extract the invoice
	// ai: turn 1: 1 messages seen
	// human: also check the invoice date
	// ai: turn 2: 3 messages seen
	// consumed up to entry 1
}
