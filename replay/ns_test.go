package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// nested is a Go graph whose node "inner" is a subgraph (namespace
// "inner") of two steps that ask the model, each with question.
func nested(t *testing.T, question string) *runs.Graph {
	t.Helper()
	m, err := scripted.Parse("nested", []byte("replies:\n  - text: Paris\n    repeat: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("city", state.ReducerReplace), state.WithField("again", state.ReducerReplace))
	ask := func(field string) flow.NodeFunc {
		return func(ctx context.Context, _ state.Doc) (state.Update, error) {
			resp, err := agent.Generate(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: question}}})
			return state.Update{field: resp.Message.Content}, err
		}
	}
	inner, err := flow.NewGraph(schema).AddNode("a", ask("city")).AddNode("b", ask("again")).
		AddEdge(flow.START, "a").AddEdge("a", "b").Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := flow.NewGraph(schema).AddSubgraph("inner", inner, flow.SubgraphOptions{}).AddEdge(flow.START, "inner").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "nested", Graph: g}
}

// TestReplayNamespace: Options.Namespace (cairn replay --ns) replays a
// subgraph's namespace — the root runs again, the namespace's checkpoints
// are compared: the same code matches them; a changed question departs
// at the namespace's first step (node a, its checkpoint 2), at its first
// model call; a namespace the thread lacks, or --from with --ns, is
// refused.
func TestReplayNamespace(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	if _, err := nested(t, "Which city?").Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		question string
		matched  bool
		compared int // the namespace's checkpoints found equal
	}{
		{"same code", "Which city?", true, 3},
		{"changed question", "Which town?", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: nested(t, tc.question), Namespace: "inner:1"})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Matched != tc.matched || rep.Checkpoints != tc.compared || rep.Namespace != "inner:1" {
				t.Fatalf("report: %s", rep.MarshalIndent())
			}
			if d := rep.Departure; !tc.matched && (d.Seq != 2 || d.Node != "a" || d.Call == nil || d.Call.Namespace != "inner:1" || d.Call.Index != 0) {
				t.Fatalf("departure: %s", rep.MarshalIndent())
			}
		})
	}
}

func TestReplayNamespaceRefused(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	a := nested(t, "Which city?")
	if _, err := a.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts replay.Options
		want error
	}{
		{"no such namespace", replay.Options{Assistant: a, Namespace: "inner:9"}, store.ErrNotFound},
		{"from with a namespace", replay.Options{Assistant: a, Namespace: "inner:1", From: 2}, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := replay.Thread(ctx, s, "t1", tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
