package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/store"
)

// Config configures a Service.
type Config struct {
	// Store holds the threads, their checkpoints, and the runs with their
	// event logs (its backend must keep a store.RunLog; the built-in ones
	// do).
	Store store.Store
	// Assistants are what runs run, by id.
	Assistants []Assistant
	// Logger receives what the service does (nil: nothing).
	Logger *slog.Logger
	// Redact hides secrets in what runs record and stream (nil: the
	// default secret shapes).
	Redact *redact.Redactor
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ExpiryCheck is how often expired pauses are looked for (default
	// 1 s), when an assistant bounds the wait (AssistantInfo).
	ExpiryCheck time.Duration
	// Queue, when set, records each run and puts it on this queue for
	// workers (package worker) instead of running it in this process;
	// Execute runs a queued run. Streams, waits and joins then follow the
	// run through the store.
	Queue store.RunQueue
	// Defaults are each graph's default config and context (by graph
	// id), under every run of its assistants: LangGraph's
	// LANGGRAPH_CONFIG. A system assistant shows them as its own.
	Defaults map[string]GraphDefaults
	// WebhookCheck, when set, allows or refuses a run's webhook URL (an
	// operator's allow-list; nil: any http or https URL without
	// credentials). HTTPClient posts webhooks (nil: http.DefaultClient).
	WebhookCheck func(*url.URL) error
	HTTPClient   *http.Client
	// BaseURL, when set, is the server's own address: a webhook that is a
	// path ("/hooks/run-done") is resolved against it, as LangGraph's
	// server posts to its own custom routes (a program that serves its
	// routes beside the API). Without it a webhook is an absolute URL.
	BaseURL *url.URL
	// WebhookPrivate lets webhooks go to loopback, private and link-local
	// addresses (a receiver on this machine or network). Without it such a
	// webhook is refused when the run is made, and a delivery whose name
	// resolves to such an address by then is refused when it connects
	// (unless HTTPClient delivers: it is then the operator's). Config.BaseURL's
	// routes are always allowed.
	WebhookPrivate bool
	// WebhookPolicy is what the operator allows of webhooks and adds to
	// their deliveries (LANGGRAPH_WEBHOOKS: ParseWebhookPolicy). Its
	// header values should be among the redactor's secrets.
	WebhookPolicy WebhookPolicy
	// WebhookSweep is how often the webhooks a run could not deliver yet,
	// or a process left behind, are looked for (default 30 s; at Start
	// too).
	WebhookSweep time.Duration
	// Items keeps the assistants clients make (CreateAssistant), under
	// each tenant's store.SystemTenant (nil: store.ItemsOf(Store)).
	Items store.ItemStore
	// CronTick is how often the crons are looked at for due ticks
	// (default 5 s; negative: never, in this process). CronClaimTimeout
	// is how long a tick claimed by a process that has not made its run
	// waits before another takes it over (default 1 min). CronClock is
	// the crons' clock (nil: Now).
	CronTick, CronClaimTimeout time.Duration
	CronClock                  func() time.Time
}

// Service runs the runs of assistants on threads: it creates them (or
// queues them for workers), runs them one at a time per thread as their
// multitask strategy says, keeps their event logs, answers pauses, and
// picks up after a crash. It knows nothing of HTTP: package server is its
// HTTP front end, cairn run --queue and package worker call it directly.
type Service struct {
	cfg        Config
	store      store.Store
	runlog     store.RunLog
	assistants map[string]Assistant
	order      []string
	log        *slog.Logger
	redact     *redact.Redactor
	runs       *runManager
	queue      store.RunQueue // nil: runs run in this process
	expiries   *expiries
	registry   registry
	started    time.Time
	// guarded delivers webhooks that may not reach private addresses.
	guarded *http.Client
	outbox  *outbox
	// ordinals numbers runs on their threads (Data.Ordinal).
	ordinals ordinals
}

// ErrConfig: the service's configuration is unusable.
var ErrConfig = errors.New("runs: invalid configuration")

// New returns a service; it runs nothing until Start.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: no store", ErrConfig)
	}
	rl, err := store.RunLogOf(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.ExpiryCheck = cmp.Or(cfg.ExpiryCheck, time.Second)
	cfg.CronClaimTimeout = cmp.Or(cfg.CronClaimTimeout, time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, store: cfg.Store, runlog: rl, queue: cfg.Queue, assistants: map[string]Assistant{}, log: cfg.Logger, redact: cfg.Redact, guarded: guardedClient()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.redact == nil {
		if s.redact, err = redact.New(redact.Config{}); err != nil {
			return nil, err
		}
	}
	for id := range cfg.Defaults {
		if !slices.ContainsFunc(cfg.Assistants, func(a Assistant) bool { return a.Info().ID == id }) {
			return nil, fmt.Errorf("%w: defaults for graph %q, which is not served", ErrConfig, id)
		}
	}
	for _, a := range cfg.Assistants {
		id := a.Info().ID
		if err := store.ValidateID(id); err != nil {
			return nil, fmt.Errorf("%w: assistant id: %w", ErrConfig, err)
		}
		if _, dup := s.assistants[id]; dup {
			return nil, fmt.Errorf("%w: two assistants named %q", ErrConfig, id)
		}
		s.assistants[id] = a
		s.order = append(s.order, id)
	}
	slices.Sort(s.order)
	items := cfg.Items
	if items == nil {
		items, _ = store.ItemsOf(cfg.Store) // nil: a store without items serves system assistants alone
	}
	s.registry, s.started = registry{items: items}, cfg.Now()
	s.runs = newRunManager(s)
	s.outbox = &outbox{s: s, items: items}
	s.expiries = &expiries{s: s, due: map[string]expiry{}}
	return s, nil
}

// Start picks up the runs a previous process left pending or running on
// this store (without a queue: with one, workers do): a run that had
// begun resumes from its last checkpoint, one that had not starts. Their
// event logs go on from where they were. It also starts answering the
// pauses that wait longer than their assistant allows, and the crons'
// scheduler.
func (s *Service) Start(ctx context.Context) error {
	if s.queue == nil {
		if err := s.runs.recover(ctx); err != nil {
			return err
		}
	}
	s.outbox.start(cmp.Or(s.cfg.WebhookSweep, 30*time.Second))
	s.startCrons(cmp.Or(s.cfg.CronTick, 5*time.Second))
	if s.bounded() {
		return s.expiries.start(ctx, s.cfg.ExpiryCheck)
	}
	return nil
}

// bounded reports whether an assistant bounds the wait at its pauses.
func (s *Service) bounded() bool {
	for _, a := range s.assistants {
		if a.Info().ApprovalTimeout > 0 {
			return true
		}
	}
	return false
}

// Close cancels the runs in flight and waits for them to stop (they stay
// "running" in the store, for the next Start to pick up) until ctx ends.
func (s *Service) Close(ctx context.Context) error {
	return s.runs.shutdown(ctx)
}

// Assistant returns the assistant of an id.
func (s *Service) Assistant(id string) (Assistant, bool) {
	a, ok := s.assistants[id]
	return a, ok
}

// AssistantIDs are the ids of the service's assistants, sorted.
func (s *Service) AssistantIDs() []string { return slices.Clone(s.order) }

// Queued reports whether the service queues its runs for workers.
func (s *Service) Queued() bool { return s.queue != nil }
