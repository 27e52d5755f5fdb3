package store_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// List a tenant's threads through the thread index: newest first, by
// metadata, the paused ones oldest pause first, and count them.
func ExampleEngine_ListThreads() {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	for i, user := range []string{"ada", "bob", "ada", "cy"} {
		id := fmt.Sprint("chat-", i)
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: "acme", Metadata: map[string]any{"user": user}}); err != nil {
			panic(err)
		}
		st := store.StatusSuccess
		if i%2 == 1 {
			st = store.StatusInterrupted // paused, waiting for an answer
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: id, State: state.EmptyDoc(), Status: st}); err != nil {
			panic(err)
		}
	}
	show := func(q store.ThreadSearch) {
		ths, err := s.ListThreads(ctx, q)
		if err != nil {
			panic(err)
		}
		var out []string
		for _, th := range ths {
			out = append(out, th.ID+" "+th.Status.String())
		}
		fmt.Println(strings.Join(out, ", "))
	}
	show(store.ThreadSearch{Tenant: "acme", Desc: true, Limit: 2})
	show(store.ThreadSearch{Tenant: "acme", Metadata: map[string]any{"user": "ada"}, Desc: true})
	paused := []store.ThreadStatus{store.ThreadInterrupted}
	show(store.ThreadSearch{Tenant: "acme", Status: paused, Sort: store.SortStatusAt, Limit: 10})
	n, _ := s.CountThreads(ctx, store.ThreadSearch{Tenant: "acme", Status: paused})
	fmt.Println(n, "paused")
	// Output:
	// chat-3 interrupted, chat-2 idle
	// chat-2 idle, chat-0 idle
	// chat-1 interrupted, chat-3 interrupted
	// 2 paused
}
