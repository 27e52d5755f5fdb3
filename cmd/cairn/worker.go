package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgqueue"
	"github.com/cairn-dev/cairn/worker"
)

type workerFlags struct {
	assistants, safeDir, id string
	concurrency             int
	webhookPrivate          bool
	lease, rescueAfter      time.Duration
	retention               retentionFlags
	memory                  memoryFlags
}

func (a *app) workerCmd() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the runs cairn serve --queue puts on a PostgreSQL store's queue, under fenced leases",
		Long: "cairn worker takes the queued runs of the assistants in --assistants (agent and pipeline files, checked at start) " +
			"from the store's queue (River, in the store's database) and runs them, holding the lease of each run's thread: a " +
			"worker that dies is replaced after --rescue-after, and one that was paused past its lease finds its writes refused. " +
			"SIGTERM stops taking runs and stops the runs in flight before their next step commits; another worker resumes them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.work(cmd.Context(), f) },
	}
	cmd.Flags().StringVar(&f.assistants, "assistants", ".", "the folder of agent files (*.md) and pipeline files (*.yaml) whose runs this worker takes")
	cmd.Flags().StringVar(&f.safeDir, "safe-dir", "", "the directory agent files may reach (default: each file's folder)")
	cmd.Flags().StringVar(&f.id, "id", "", "the worker's name (default: host and process id)")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 10, "runs of each assistant run at once")
	cmd.Flags().DurationVar(&f.lease, "lease", 30*time.Second, "how long a thread's lease lasts unless renewed (renewed every third of it)")
	cmd.Flags().BoolVar(&f.webhookPrivate, "webhook-private", false, "deliver runs' webhooks to loopback, private and link-local addresses too (as cairn serve --webhook-private lets runs name them)")
	cmd.Flags().DurationVar(&f.rescueAfter, "rescue-after", time.Minute, "how long a run may stay with a silent worker before another takes it (at least --lease)")
	f.retention.bind(cmd)
	f.memory.bind(cmd)
	return cmd
}

// queueBackend opens the --store as a PostgreSQL store with River's
// tables migrated, and its run queue (pgqueue).
func (a *app) queueBackend(ctx context.Context, what string) (*store.Engine, *postgres.Backend, store.RunQueue, error) {
	if s := store.Scheme(a.storeURL); s != "postgres" && s != "postgresql" {
		return nil, nil, nil, usagef("%s needs a PostgreSQL store (--store postgres://…): runs are queued in its database", what)
	}
	s, err := a.open()
	if err != nil {
		return nil, nil, nil, err
	}
	b, ok := s.Backend().(*postgres.Backend)
	if !ok {
		s.Close()
		return nil, nil, nil, fmt.Errorf("%s: the store is not PostgreSQL", what)
	}
	if err := pgqueue.Migrate(ctx, b); err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	q, err := pgqueue.Of(s)
	if err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	return s, b, q, nil
}

func (a *app) work(ctx context.Context, f workerFlags) error {
	if f.concurrency < 1 || f.lease <= 0 || f.rescueAfter < f.lease {
		return usagef("--concurrency %d, --lease %s, --rescue-after %s: a positive concurrency and lease, and a rescue no shorter than the lease", f.concurrency, f.lease, f.rescueAfter)
	}
	if st, err := os.Stat(f.assistants); err != nil || !st.IsDir() {
		return usagef("--assistants %s: not a folder", f.assistants)
	}
	if err := f.retention.check(); err != nil {
		return err
	}
	if err := f.memory.check(); err != nil {
		return err
	}
	index, _, err := a.memoryIndex(f.memory)
	if err != nil {
		return err
	}
	list, err := a.loadAssistants(f.assistants, f.safeDir)
	if err != nil {
		return err
	}
	s, b, _, err := a.queueBackend(ctx, "cairn worker")
	if err != nil {
		return err
	}
	defer s.Close()
	if a.items, err = store.ItemsOf(s, store.WithIndex(index)); err != nil {
		return err
	}
	hooks, err := a.webhookPolicy()
	if err != nil {
		return err
	}
	rc := runs.Config{Store: s, Assistants: list, Logger: a.logger, WebhookPrivate: f.webhookPrivate, WebhookPolicy: hooks}
	if rc.Redact, err = secretsRedactor(hooks.Secrets()); err != nil {
		return err
	}
	svc, err := runs.New(rc)
	if err != nil {
		return err
	}
	id := f.id
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var names []string
	for _, as := range list {
		names = append(names, as.Info().ID)
	}
	w, err := worker.New(worker.Config{Backend: b, Store: s, Runs: svc, Assistants: names, ID: id, Concurrency: f.concurrency,
		LeaseTTL: f.lease, RescueAfter: f.rescueAfter, Logger: a.logger})
	if err != nil {
		return &usageError{err}
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	a.sweep(ctx, s, f.retention, id)
	sweepItems(ctx, a.items, f.memory.sweep, a.logger)
	fmt.Fprintf(a.stderr, "cairn: worker %s taking runs of %s (store %s)\n", id, strings.Join(names, ", "), a.shownStore())
	<-ctx.Done()
	fmt.Fprintln(a.stderr, "cairn: worker stopping; runs in flight are left for another worker")
	stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Stop(stop); err != nil {
		return err
	}
	return svc.Close(stop)
}

// loadAssistants loads the agent and pipeline files of a folder as serve
// and worker do.
func (a *app) loadAssistants(dir, safeDir string) ([]runs.Assistant, error) {
	if safeDir != "" {
		abs, err := filepath.Abs(safeDir)
		if err != nil {
			return nil, usagef("--safe-dir %s: %v", safeDir, err)
		}
		safeDir = abs
	}
	cfg := runs.AssistantConfig{Getenv: a.getenv, AllowedRoot: safeDir,
		Configure: func(rc *agentfile.RunConfig) {
			rc.Logger = a.logger
			rc.Items = a.items // set by serve and worker once the store is open
			rc.Models = a.models
		},
		ConfigurePipeline: func(pc *pipeline.Config) { pc.Logger = a.logger }}
	list, err := runs.LoadAssistants(dir, cfg)
	if err != nil {
		return nil, &usageError{err}
	}
	return list, nil
}
