package worker_test

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgqueue"
	"github.com/cairn-dev/cairn/worker"
)

// A worker process: it takes the runs of the assistants in agents/ that a
// cairn serve --queue queued on the same PostgreSQL database. (It needs a
// database, so it is compiled, not run.) It needs no HTTP server: the run
// service executes the runs.
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
	assistants, err := runs.LoadAssistants("agents", runs.AssistantConfig{})
	if err != nil {
		panic(err)
	}
	svc, err := runs.New(runs.Config{Store: s, Assistants: assistants})
	if err != nil {
		panic(err)
	}
	var ids []string
	for _, a := range assistants {
		ids = append(ids, a.Info().ID)
	}
	w, err := worker.New(worker.Config{Backend: b, Store: s, Runs: svc, Assistants: ids, LeaseTTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	defer w.Stop(ctx)
	<-ctx.Done() // until the program stops
}
