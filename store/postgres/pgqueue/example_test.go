package pgqueue_test

import (
	"context"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgqueue"
)

// A server that queues its runs for workers on a PostgreSQL store. (It
// needs a server, so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	b, err := postgres.Open(ctx, "postgres://cairn@127.0.0.1:5432/cairn", postgres.Options{})
	if err != nil {
		panic(err)
	}
	s := store.New(b, store.Options{})
	defer s.Close()
	if err := pgqueue.Migrate(ctx, b); err != nil {
		panic(err)
	}
	q, err := pgqueue.Of(s)
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Store: s, Queue: q})
	if err != nil {
		panic(err)
	}
	_ = srv
}
