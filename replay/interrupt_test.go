package replay_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// approval is a graph whose node asks a person, and writes the answer.
func approval(prefix string) *runs.Graph {
	schema := state.MustSchema(state.WithField("answer", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			var a string
			if err := flow.Interrupt(ctx, "ship it?", &a); err != nil {
				return nil, err
			}
			return state.Update{"answer": prefix + a}, nil
		}).
		AddEdge(flow.START, "ask").Compile()
	if err != nil {
		panic(err)
	}
	return &runs.Graph{ID: "approval", Graph: g}
}

// TestReplayInterruptAnswer: the answer a run was resumed with is taken
// from the recording, so an interrupted and answered thread replays to
// the same end, and code that uses the answer otherwise departs there.
func TestReplayInterruptAnswer(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	g := approval("")
	if _, err := g.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Resume: true, Answer: "yes"})
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("resume: %v %v", res.StopReason, err)
	}
	rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: approval("")})
	if err != nil || !rep.Matched {
		t.Fatalf("same code: %s, %v", rep.MarshalIndent(), err)
	}
	rep, err = replay.Thread(ctx, s, "t1", replay.Options{Assistant: approval("answer: ")})
	if err != nil || rep.Matched || len(rep.Departure.StateDiff) != 1 || string(rep.Departure.StateDiff[0].Value) != `"answer: yes"` {
		t.Fatalf("changed code: %s, %v", rep.MarshalIndent(), err)
	}
}
