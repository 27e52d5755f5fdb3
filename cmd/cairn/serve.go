package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
)

type serveFlags struct {
	addr, assistants, auth, safeDir string
	cors                            []string
	maxBody                         int64
	timeout, cronTick               time.Duration
	rateLimit                       float64
	queue, webhookPrivate           bool
	retention                       retentionFlags
	memory                          memoryFlags
}

func (a *app) serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the LangGraph Platform API over the store: assistants from agent and pipeline files, threads, runs, resumable streams",
		Long: "cairn serve answers the LangGraph Platform HTTP API (the official LangGraph SDKs work against it) on --addr. " +
			"Its assistants are the agent files (*.md) and pipeline files (*.yaml) in --assistants, each checked at start: a broken " +
			"file stops the server before it listens. Runs left pending or running by an earlier server on the store are picked up " +
			"at start. Without API keys (--auth none) the server listens on loopback addresses only.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context(), f) },
	}
	cmd.Flags().StringVar(&f.addr, "addr", "127.0.0.1:2024", "the address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&f.assistants, "assistants", ".", "the folder of agent files (*.md) and pipeline files (*.yaml) to serve; none: no assistants (threads, the store and the LangGraph checkpointer only)")
	cmd.Flags().StringVar(&f.auth, "auth", "none", "keys: every request needs an API key (cairn keys create), whose tenant scopes it; none: no keys, one tenant, loopback addresses only")
	cmd.Flags().Float64Var(&f.rateLimit, "rate-limit", 0, "requests a second allowed to each API key (bursts of twice that; 0: no limit; needs --auth keys)")
	cmd.Flags().StringVar(&f.safeDir, "safe-dir", "", "the directory agent files may reach; their safe_dir must be inside it (default: each file's folder)")
	cmd.Flags().BoolVar(&f.webhookPrivate, "webhook-private", false, "let runs' webhooks go to loopback, private and link-local addresses (a receiver on this machine or network); refused otherwise")
	cmd.Flags().BoolVar(&f.queue, "queue", false, "record runs and queue them for cairn worker processes instead of running them here (PostgreSQL stores)")
	cmd.Flags().StringSliceVar(&f.cors, "cors", []string{"loopback"}, "origins whose pages may call the server from a browser: loopback (pages on this machine, any port), *, scheme://host[:port] (port a number or *), comma-separated; none: no cross-origin calls")
	cmd.Flags().Int64Var(&f.maxBody, "max-body", 1<<20, "the largest request body, in bytes")
	cmd.Flags().DurationVar(&f.timeout, "request-timeout", 30*time.Second, "the longest a request other than a stream, wait or join may take")
	cmd.Flags().DurationVar(&f.cronTick, "cron-tick", 5*time.Second, "how often the crons are looked at for due ticks (a tick runs at most this late)")
	f.retention.bind(cmd)
	f.memory.bind(cmd)
	return cmd
}

// origins is --cors as server.Config.AllowOrigins.
func (f serveFlags) origins() []string {
	out := []string{}
	for _, o := range f.cors {
		switch o {
		case "none":
		case "loopback":
			out = append(out, server.LoopbackOrigins()...)
		default:
			out = append(out, o)
		}
	}
	return out
}

// checkServe checks the flags before anything is opened.
func (f serveFlags) check() error {
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usagef("--addr %q: %v", f.addr, err)
	}
	if f.auth != "none" && f.auth != "keys" {
		return usagef("--auth %q: want keys or none", f.auth)
	}
	if f.rateLimit < 0 || (f.rateLimit > 0 && f.auth != "keys") {
		return usagef("--rate-limit %g: a positive rate, with --auth keys", f.rateLimit)
	}
	if ip := net.ParseIP(host); f.auth == "none" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usagef("--addr %s: without API keys (--auth none) the server listens on loopback addresses only (127.0.0.1, ::1, localhost)", f.addr)
	}
	if err := server.CheckOrigins(f.origins()); err != nil {
		return usagef("--cors: %v", err)
	}
	if f.maxBody < 1024 {
		return usagef("--max-body %d: at least 1024 bytes", f.maxBody)
	}
	if f.timeout <= 0 {
		return usagef("--request-timeout %s: must be positive", f.timeout)
	}
	if f.cronTick <= 0 {
		return usagef("--cron-tick %s: must be positive", f.cronTick)
	}
	if st, err := os.Stat(f.assistants); f.assistants != "none" && (err != nil || !st.IsDir()) {
		return usagef("--assistants %s: not a folder", f.assistants)
	}
	if err := f.memory.check(); err != nil {
		return err
	}
	return f.retention.check()
}

// webhookPolicy reads LANGGRAPH_WEBHOOKS (runs.ParseWebhookPolicy): what
// runs' webhooks may name and the headers their deliveries carry.
func (a *app) webhookPolicy() (runs.WebhookPolicy, error) {
	v := a.getenv("LANGGRAPH_WEBHOOKS")
	if v == "" {
		return runs.WebhookPolicy{}, nil
	}
	p, err := runs.ParseWebhookPolicy([]byte(v), a.getenv)
	if err != nil {
		return p, usagef("LANGGRAPH_WEBHOOKS: %v", err)
	}
	return p, nil
}

// serveEnv reads cairn serve's environment: graphs' defaults
// (LANGGRAPH_CONFIG) and the webhook policy (LANGGRAPH_WEBHOOKS).
func (a *app) serveEnv() (map[string]runs.GraphDefaults, runs.WebhookPolicy, error) {
	var defaults map[string]runs.GraphDefaults
	if v := a.getenv("LANGGRAPH_CONFIG"); v != "" {
		var err error
		if defaults, err = runs.ParseGraphDefaults([]byte(v)); err != nil {
			return nil, runs.WebhookPolicy{}, usagef("LANGGRAPH_CONFIG: %v", err)
		}
	}
	hooks, err := a.webhookPolicy()
	return defaults, hooks, err
}

// secretsRedactor is a redactor that knows the operator's secrets too
// (nil, the default one, when there are none).
func secretsRedactor(secrets []string) (*redact.Redactor, error) {
	secrets = slices.DeleteFunc(secrets, func(v string) bool { return v == "" })
	if len(secrets) == 0 {
		return nil, nil
	}
	r, err := redact.New(redact.Config{})
	if err != nil {
		return nil, err
	}
	return r.WithSecrets(secrets...), nil
}

func (a *app) serve(ctx context.Context, f serveFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	defaults, hooks, err := a.serveEnv()
	if err != nil {
		return err
	}
	index, indexKey, err := a.memoryIndex(f.memory)
	if err != nil {
		return err
	}
	var list []runs.Assistant
	if f.assistants != "none" {
		if list, err = a.loadAssistants(f.assistants, f.safeDir); err != nil {
			return err
		}
	}
	for id := range defaults {
		if !slices.ContainsFunc(list, func(x runs.Assistant) bool { return x.Info().ID == id }) {
			return usagef("LANGGRAPH_CONFIG: defaults for graph %q, which --assistants %s does not serve", id, f.assistants)
		}
	}
	var s *store.Engine
	var queue store.RunQueue
	if f.queue {
		s, _, queue, err = a.queueBackend(ctx, "cairn serve --queue")
	} else {
		s, err = a.open()
	}
	if err != nil {
		return err
	}
	defer s.Close()
	items, err := store.ItemsOf(s, store.WithIndex(index))
	if err != nil {
		return err
	}
	a.items = items // the agent files' memory tools use it too
	sc := server.Config{Store: s, Assistants: list, Logger: a.logger, MaxBodyBytes: f.maxBody, RequestTimeout: f.timeout, RateLimit: f.rateLimit, Queue: queue, Items: items,
		AllowOrigins: f.origins(), WebhookPrivate: f.webhookPrivate}
	sc.Defaults, sc.WebhookPolicy, sc.CronTick = defaults, hooks, f.cronTick
	if sc.CronClock, err = a.cronClock(); err != nil {
		return err
	}
	if sc.Redact, err = secretsRedactor(append(hooks.Secrets(), indexKey)); err != nil {
		return err
	}
	authNote := "auth none: no API keys, loopback only"
	if f.auth == "keys" {
		if sc.Keys, err = serveKeys(ctx, s); err != nil {
			return err
		}
		authNote = "auth keys"
	}
	srv, err := server.New(sc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", f.addr, err)
	}
	if err := srv.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	names := []string{}
	for _, as := range list {
		names = append(names, as.Info().ID)
	}
	host, _ := os.Hostname()
	a.sweep(ctx, s, f.retention, fmt.Sprintf("serve-%s-%d", host, os.Getpid()))
	sweepItems(ctx, items, f.memory.sweep, a.logger)
	fmt.Fprintf(a.stderr, "cairn: serving http://%s (store %s; %s; %s; assistants: %s; UI at /ui/)\n", ln.Addr(), a.shownStore(), authNote, f.memory.note(), cmp.Or(strings.Join(names, ", "), "none"))
	return a.serveHTTP(ctx, srv, ln)
}

// serveHTTP answers on ln until ctx ends, then stops the server (runs in
// flight stay running in the store, for the next start).
func (a *app) serveHTTP(ctx context.Context, srv *server.Server, ln net.Listener) error {
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		_ = srv.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(a.stderr, "cairn: stopping; runs in flight are left for the next start")
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Close(stop)
	if err := hs.Shutdown(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// serveKeys is the store's key store, which must hold a key.
func serveKeys(ctx context.Context, s store.Store) (store.KeyStore, error) {
	ks, err := store.KeysOf(s)
	if err != nil {
		return nil, err
	}
	keys, err := ks.Keys(ctx, "")
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, usagef("--auth keys: the store has no API key; make one with cairn keys create --tenant T")
	}
	return ks, nil
}
