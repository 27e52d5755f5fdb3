package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// A SQLite store in one file: what a checkpoint committed is there for the
// next process that opens it.
func ExampleOpenStore() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	ctx := context.Background()

	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		panic(err)
	}
	doc, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"count": 1})
	if err != nil {
		panic(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "t", Nodes: []string{"count"}, Patch: patch, State: doc}); err != nil {
		panic(err)
	}
	s.Close()

	again, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		panic(err)
	}
	defer again.Close()
	head, err := again.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil {
		panic(err)
	}
	fmt.Println(head.Seq, head.Nodes, head.State)
	// Output: 1 [count] {"count":1}
}
