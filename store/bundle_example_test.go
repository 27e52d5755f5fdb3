package store_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Export a thread as a bundle and import it into another store under a
// new id: the history comes along, checkpoint by checkpoint.
func ExampleImportBundle() {
	ctx := context.Background()
	src := inmem.Open(store.Options{})
	defer src.Close()
	schema := state.MustSchema(state.WithField("n", "replace"))
	doc, head := state.EmptyDoc(), int64(0)
	for i := range 3 {
		next, patch, _ := schema.Apply(doc, state.Update{"n": i})
		cp, err := src.Append(ctx, store.Checkpoint{Thread: "t1", Parent: head, Patch: patch, State: next})
		if err != nil {
			panic(err)
		}
		doc, head = next, cp.Seq
	}
	var bundle bytes.Buffer
	if _, err := store.ExportBundle(ctx, src, "t1", &bundle); err != nil {
		panic(err)
	}

	dst := inmem.Open(store.Options{})
	defer dst.Close()
	info, err := store.ImportBundle(ctx, dst, &bundle, store.ImportOptions{As: "t1-copy"})
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Thread, info.Checkpoints)
	cp, _ := dst.Load(ctx, store.LoadRequest{Thread: "t1-copy", Seq: 2})
	fmt.Println(cp.State)
	// Output:
	// t1-copy 3
	// {"n":1}
}
