package inmem_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// The memory backend keeps everything in the process: the reference
// implementation of the conformance suite, and a store for tests.
func ExampleOpen() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	doc, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"greeting": "hello"})
	if err != nil {
		panic(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "t", Nodes: []string{"hello"}, Patch: patch, State: doc}); err != nil {
		panic(err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil {
		panic(err)
	}
	fmt.Println(head.Seq, head.State)
	// Output: 1 {"greeting":"hello"}
}
