package postgres_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/postgres" // registers postgres:// URLs
)

// Open a store on PostgreSQL by URL (search_path keeps it in a schema of
// its own; the first read-write open creates or migrates its tables) and
// commit a first checkpoint. It needs a server, so it is compiled but not
// run by go test; see docs/postgres.md for a local one.
func Example() {
	ctx := context.Background()
	url := os.Getenv("CAIRN_STORE") // e.g. postgres://cairn@127.0.0.1:5432/cairn?search_path=cairn
	s, err := store.Open(ctx, url, store.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	doc, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"task": "write the post"})
	if err != nil {
		fmt.Println(err)
		return
	}
	cp, err := s.Append(ctx, store.Checkpoint{Thread: "post-1", Patch: patch, State: doc})
	fmt.Println(cp.Seq, err)
}
