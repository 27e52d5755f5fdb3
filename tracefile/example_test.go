package tracefile_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/tracefile"
)

// Export writes a thread's run as a trace — manifest.json, events.jsonl,
// steps.jsonl with each step's state diff — from stored history alone.
func ExampleExport() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	g := flow.NewGraph(state.MustSchema(state.WithField("notes", state.ReducerAppend)))
	g.AddNode("draft", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"notes": "drafted"}, nil
	})
	g.AddNode("review", func(context.Context, state.Doc) (state.Update, error) {
		return state.Update{"notes": "reviewed"}, nil
	})
	c, err := g.Chain("draft", "review").Compile()
	if err != nil {
		panic(err)
	}
	r, err := flow.NewRunner(c, s, flow.Options{})
	if err != nil {
		panic(err)
	}
	if _, err := r.Invoke(ctx, "doc-1", state.Update{"notes": "asked"}); err != nil {
		panic(err)
	}

	dir, err := os.MkdirTemp("", "cairn-trace")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	m, err := tracefile.Export(ctx, s, "doc-1", dir)
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Status, m.Summary.StopReason, m.Summary.Steps)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// completed success 3
	// events.jsonl
	// manifest.json
	// steps.jsonl
}
