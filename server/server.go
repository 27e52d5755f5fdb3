package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server/lgsaver"
	"github.com/cairn-dev/cairn/store"
)

// Config configures a Server.
type Config struct {
	// Store holds the threads, their checkpoints, and the runs with their
	// event logs (its backend must keep a store.RunLog; the built-in ones
	// do).
	Store store.Store
	// Assistants are what runs run, by id.
	Assistants []runs.Assistant
	// Logger receives what the server does (nil: nothing).
	Logger *slog.Logger
	// Redact hides secrets in logged errors (nil: the default secret
	// shapes).
	Redact *redact.Redactor
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64
	// RequestTimeout bounds a request that is not a stream, a wait or a
	// join (default 30 s).
	RequestTimeout time.Duration
	// Heartbeat is the interval of keep-alive bytes on streams, waits
	// and joins (default 5 s).
	Heartbeat time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Keys, when set, authenticate every request but /ok, /info,
	// /openapi.json and the UI's files by API key (x-api-key or
	// Authorization: Bearer); each key's tenant scopes what the request
	// sees. Nil: no authentication, one tenant ("").
	Keys store.KeyStore
	// RateLimit caps the requests a second of each API key (bursts of
	// twice that); 0: no limit.
	RateLimit float64
	// ExpiryCheck is how often expired pauses are looked for (default
	// 1 s), when an assistant bounds the wait (AssistantInfo).
	ExpiryCheck time.Duration
	// Queue, when set, records each run and puts it on the store's queue
	// for workers (package worker, cairn worker) instead of running it in
	// this process: the store's run queue (pgqueue.Of, PostgreSQL).
	// Streams, waits and joins then follow the run through the store.
	Queue store.RunQueue
	// WebhookCheck, when set, allows or refuses a run's webhook URL
	// (runs.Config.WebhookCheck): an operator's allow-list.
	WebhookCheck func(*url.URL) error
	// BaseURL, when set, is the server's own address, against which a
	// webhook that is a path resolves (runs.Config.BaseURL).
	BaseURL *url.URL
	// WebhookPrivate lets webhooks go to loopback and private addresses
	// (runs.Config.WebhookPrivate; cairn serve --webhook-private).
	WebhookPrivate bool
	// WebhookPolicy: LANGGRAPH_WEBHOOKS (runs.Config.WebhookPolicy).
	WebhookPolicy runs.WebhookPolicy
	// Defaults are graphs' default config and context (runs.Config.Defaults;
	// cairn serve reads them from LANGGRAPH_CONFIG).
	Defaults map[string]runs.GraphDefaults
	// Items is the long-term memory store the /store routes serve, each
	// request scoped to its tenant. Nil: the store's own items
	// (store.ItemsOf, full-text search; give one made with store.WithIndex
	// for semantic search).
	Items store.ItemStore
	// AllowOrigins are the origins whose pages may call the server from a
	// browser (CORS): "*", or scheme://host[:port] with port a number or
	// "*". Nil: LoopbackOrigins; empty: none.
	AllowOrigins []string
	// CronTick, CronClaimTimeout and CronClock schedule the crons
	// (runs.Config's).
	CronTick, CronClaimTimeout time.Duration
	CronClock                  func() time.Time
}

// Server serves the LangGraph Platform API over a Cairn store: the HTTP
// front end of a runs.Service. It is an http.Handler; Start picks up the
// runs a previous process left unfinished and Close stops the runs in
// flight.
type Server struct {
	cfg     Config
	svc     *runs.Service
	queue   store.RunQueue // the service's (nil: runs run in this process)
	store   store.Store
	runlog  store.RunLog
	log     *slog.Logger
	redact  *redact.Redactor
	mux     *http.ServeMux
	limits  *limiters
	started time.Time
	saver   *lgsaver.Saver // the LangGraph saver protocol (/checkpointer/…)
	origins []originRule
}

// ErrConfig: the server's configuration is unusable.
var ErrConfig = errors.New("server: invalid configuration")

// New returns a server; it runs nothing until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: no store", ErrConfig)
	}
	rl, err := store.RunLogOf(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	rc := runs.Config{Store: cfg.Store, Assistants: cfg.Assistants, Logger: cfg.Logger, Redact: cfg.Redact, Now: cfg.Now, ExpiryCheck: cfg.ExpiryCheck, Queue: cfg.Queue,
		Defaults: cfg.Defaults, WebhookCheck: cfg.WebhookCheck, BaseURL: cfg.BaseURL, WebhookPrivate: cfg.WebhookPrivate, WebhookPolicy: cfg.WebhookPolicy,
		CronTick: cfg.CronTick, CronClaimTimeout: cfg.CronClaimTimeout, CronClock: cfg.CronClock}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 1<<20)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 30*time.Second)
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, 5*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if rc.Redact == nil {
		if rc.Redact, err = redact.New(redact.Config{}); err != nil {
			return nil, err
		}
	}
	svc, err := runs.New(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Server{cfg: cfg, svc: svc, queue: rc.Queue, store: cfg.Store, runlog: rl, log: cfg.Logger, redact: rc.Redact, started: cfg.Now()}
	s.saver = newSaver(cfg.Store)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.AllowOrigins == nil {
		cfg.AllowOrigins = LoopbackOrigins()
	}
	if s.origins, err = parseOrigins(cfg.AllowOrigins); err != nil {
		return nil, err
	}
	s.limits = newLimiters(cfg.RateLimit)
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.mux.Handle("GET /ui/", uiHandler())
	s.mux.Handle("GET /ui", uiHandler())
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, notFound("no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// Start picks up the runs a previous server left pending or running on
// this store: a run that had begun resumes from its last checkpoint, one
// that had not starts. Their event logs go on from where they were.
func (s *Server) Start(ctx context.Context) error {
	return s.svc.Start(ctx)
}

// Runs is the run service the server fronts.
func (s *Server) Runs() *runs.Service { return s.svc }

// Close cancels the runs in flight and waits for them to stop (they stay
// "running" in the store, for the next Start to pick up) until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	return s.svc.Close(ctx)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cors(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// route is one endpoint.
type route struct {
	method, path, summary string
	// long: a stream, a wait or a join, which the request timeout does
	// not bound.
	long bool
	// open: answered without an API key.
	open bool
	// bodyLimit raises the body limit of the route above the server's.
	bodyLimit int64
	handler   func(w http.ResponseWriter, r *http.Request) error
}

// wrap applies what every request gets: the body limit, the timeout,
// the tenant, and errors written as the API writes them.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		r.Body = http.MaxBytesReader(w, r.Body, max(s.cfg.MaxBodyBytes, rt.bodyLimit))
		tenant, who := "", ""
		if !rt.open {
			var ok bool
			if tenant, who, ok = s.admit(w, r); !ok {
				return
			}
		}
		ctx := context.WithValue(r.Context(), arrivalKey{}, arrived)
		if !rt.long {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
			defer cancel()
		}
		ctx = withCaller(runs.WithTenant(ctx, tenant), who)
		err := checkQuery(r.URL.RawQuery)
		if err == nil {
			err = rt.handler(w, r.WithContext(ctx))
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

type arrivalKey struct{}

// arrivalOf is when the request arrived (now, for a context without one).
func arrivalOf(ctx context.Context) time.Time {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}
