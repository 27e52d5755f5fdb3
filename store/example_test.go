package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/sqlite"
)

// Append checkpoints, load any of them, walk history, fork, and see a
// stale writer refused.
func Example() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))

	doc := state.EmptyDoc()
	var head int64
	for i, text := range []string{"hello", "how are you?", "fine"} {
		next, patch, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint("m", i), Content: text}})
		if err != nil {
			panic(err)
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "chat-1", Parent: head, Nodes: []string{"reply"}, Patch: patch, State: next})
		if err != nil {
			panic(err)
		}
		doc, head = next, cp.Seq
	}

	// A writer that still thinks seq 2 is the head is refused.
	_, err := s.Append(ctx, store.Checkpoint{Thread: "chat-1", Parent: 2, State: doc})
	fmt.Println(errors.Is(err, store.ErrConflict))

	old, _ := s.Load(ctx, store.LoadRequest{Thread: "chat-1", Seq: 1})
	fmt.Println(old.State)

	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "chat-1"}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(cp.Seq, cp.Parent, cp.Nodes, cp.Patch[0].Op, cp.Patch[0].Path)
	}

	fork, _ := s.Fork(ctx, store.ForkRequest{Thread: "chat-1", At: 1, Into: "chat-1-retry"})
	fmt.Println(fork.Thread, fork.Seq, fork.Meta.ForkedFrom.Seq)
	// Output:
	// true
	// {"messages":[{"id":"m0","content":"hello"}]}
	// 3 2 [reply] add /messages/-
	// 2 1 [reply] add /messages/-
	// 1 0 [reply] add /messages
	// chat-1-retry 1 1
}

// Gates, handoffs and subgraphs write to their own namespaces of a thread;
// Namespaces lists them.
func ExampleEngine_Namespaces() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	for _, ns := range []string{"", "gate:1", "gate:1", "gate:2"} {
		head, _ := s.Load(ctx, store.LoadRequest{Thread: "run-1", Namespace: ns})
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "run-1", Namespace: ns, Parent: head.Seq, State: state.EmptyDoc()}); err != nil {
			panic(err)
		}
	}
	nss, err := s.Namespaces(ctx, "run-1")
	if err != nil {
		panic(err)
	}
	for _, ns := range nss {
		fmt.Printf("%q head %d, %d checkpoints\n", ns.Name, ns.Head, ns.Checkpoints)
	}
	// Output:
	// "" head 1, 1 checkpoints
	// "gate:1" head 2, 2 checkpoints
	// "gate:2" head 1, 1 checkpoints
}

// Stores open from a URL through the driver its scheme registered:
// importing a backend (here store/sqlite) registers it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "state.db"), store.OpenOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Close())
	// A scheme no imported backend registered is refused, naming those that are.
	_, err = store.Open(context.Background(), "mysql://db", store.OpenOptions{})
	fmt.Println(errors.Is(err, store.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

// A read command opens the store read-only: a mistyped path is an error,
// not a new empty store.
func ExampleOpen_readOnly() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	_, err = store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "typo", "state.db"), store.OpenOptions{ReadOnly: true})
	fmt.Println(errors.Is(err, store.ErrNotFound))
	_, statErr := os.Stat(filepath.Join(dir, "typo"))
	fmt.Println(os.IsNotExist(statErr))
	// Output:
	// true
	// true
}
