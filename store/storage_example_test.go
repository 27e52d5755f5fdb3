package store_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Where a thread's bytes go: its checkpoints, shared out by the state
// field each step changed.
func ExampleThreadStorageOf() {
	ctx := context.Background()
	s := inmem.Open(store.Options{NoCompression: true})
	defer s.Close()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("turns", state.ReducerAdd))
	doc := state.EmptyDoc()
	var head int64
	for i, text := range []string{"hello", "how are you?", "fine, and you?"} {
		next, patch, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint("m", i), Content: text}, "turns": 1})
		if err != nil {
			panic(err)
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "chat-1", Parent: head, Patch: patch, State: next})
		if err != nil {
			panic(err)
		}
		doc, head = next, cp.Seq
	}
	st, err := store.ThreadStorageOf(ctx, s, "chat-1")
	if err != nil {
		panic(err)
	}
	c := st.Checkpoints
	fmt.Printf("%d checkpoints: %d bytes of patches, %d snapshot of %d bytes\n", c.Count, c.PatchBytes, c.Snapshots, c.SnapshotBytes)
	fmt.Printf("messages: %d bytes, turns: %d bytes\n", st.Channels["messages"].Bytes, st.Channels["turns"].Bytes)
	fmt.Println("total:", st.TotalBytes, "bytes")
	// Output:
	// 3 checkpoints: 210 bytes of patches, 1 snapshot of 57 bytes
	// messages: 174 bytes, turns: 36 bytes
	// total: 267 bytes
}
