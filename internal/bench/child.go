package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
)

// ServeCommand is the hidden subcommand of cairn that serves the chat
// assistant for W3 and W4 in a process of its own (ServeMain).
const ServeCommand = "bench-serve"

// statsPath is the child's own route: what it measured (ServerStats).
const statsPath = "/__bench/stats"

// ServeConfig is what the bench's server process serves.
type ServeConfig struct {
	Store string // store URL
	Addr  string // host:port to listen on (port 0: a free one)
	// CPUProfile, when set, is written with a CPU profile of the process
	// from start to stop.
	CPUProfile string
	// AssistantFile, when set, is a chat agent file (kind: chat) served
	// instead of the Go graph of ChatAssistant.
	AssistantFile string
}

// ParseServeArgs reads the arguments of the serve subcommand: --store
// URL, --addr HOST:PORT and --cpuprofile FILE.
func ParseServeArgs(args []string) (ServeConfig, error) {
	var c ServeConfig
	fs := flag.NewFlagSet(ServeCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Store, "store", "", "store URL")
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "CPU profile file")
	fs.StringVar(&c.AssistantFile, "assistant-file", "", "a chat agent file to serve instead of the Go graph")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %s: %v", store.ErrInvalidArgument, ServeCommand, err)
	}
	if c.Store == "" || fs.NArg() > 0 {
		return c, fmt.Errorf("%w: %s --store URL [--addr HOST:PORT] [--cpuprofile FILE] [--assistant-file FILE]", store.ErrInvalidArgument, ServeCommand)
	}
	return c, nil
}

// ServeMain is the bench's server process: it serves the chat assistant
// (ChatAssistant) through server.New over the store of args
// (ParseServeArgs), each request timed, prints "listening URL" on stdout
// once it accepts connections, and stops when ctx ends.
func ServeMain(ctx context.Context, args []string, stdout io.Writer) error {
	return serveMain(ctx, args, stdout, nil)
}

// serveMain is ServeMain with middleware (nil: none) around the server,
// inside the timing: the tests' way to make a server fail.
func serveMain(ctx context.Context, args []string, stdout io.Writer, middleware func(http.Handler) http.Handler) error {
	cfg, err := ParseServeArgs(args)
	if err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	s, err := store.Open(ctx, cfg.Store, store.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	chat, err := serveAssistant(cfg)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Store: s, Assistants: []runs.Assistant{chat}})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = srv.Close(context.Background())
		return fmt.Errorf("bench: listen %s: %w", cfg.Addr, err)
	}
	var h http.Handler = srv
	if middleware != nil {
		h = middleware(srv)
	}
	return serveTimed(ctx, srv, h, ln, stdout)
}

// serveAssistant is the assistant the bench's server serves: the chat
// agent file of cfg, or the Go graph.
func serveAssistant(cfg ServeConfig) (runs.Assistant, error) {
	if cfg.AssistantFile != "" {
		return ChatFile(cfg.AssistantFile)
	}
	return ChatAssistant()
}

// serveTimed serves h (srv, or a handler around it) on ln, each request
// timed, and the stats on statsPath, until ctx ends; then it stops the
// server.
func serveTimed(ctx context.Context, srv *server.Server, h http.Handler, ln net.Listener, stdout io.Writer) error {
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+statsPath, rec.serveStats)
	mux.Handle("/", rec.wrap(h))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "listening http://%s\n", ln.Addr())
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Close(stop)
	if err := hs.Shutdown(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// ServerStats is what the bench's server process measured of itself.
type ServerStats struct {
	// Requests are the requests it answered, in the order they ended, each
	// with the time its handler took.
	Requests []TimedRequest `json:"requests"`
	// PeakRSSBytes is the process's peak resident memory (VmHWM).
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// CPUMS is the process's CPU time (user and system) so far.
	CPUMS float64 `json:"cpu_ms"`
}

// TimedRequest is one request the server answered: its route (the
// pattern it matched, or its method and path) and its handler's time.
type TimedRequest struct {
	Route string  `json:"route"`
	US    float64 `json:"us"`
}

// recorder times every request's handler.
type recorder struct {
	mu   sync.Mutex
	reqs []TimedRequest
}

func (rc *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(t0)
		route := r.Pattern // set by the server's mux on r
		if route == "" {
			route = r.Method + " " + r.URL.Path
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, TimedRequest{Route: route, US: float64(d.Nanoseconds()) / 1000})
		rc.mu.Unlock()
	})
}

func (rc *recorder) serveStats(w http.ResponseWriter, _ *http.Request) {
	rc.mu.Lock()
	st := ServerStats{Requests: append([]TimedRequest(nil), rc.reqs...), PeakRSSBytes: peakRSS(), CPUMS: ms(cpuTime())}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}
