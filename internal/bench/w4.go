package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// W4Config configures W4: Threads threads, each with one turn of the chat
// assistant, every 100th paused at an interrupt; then the listings a thread
// list, an approvals inbox and an operator use, timed through the API.
type W4Config struct {
	Threads int // T (default 10,000)
	// Store is the store URL (empty: a fresh SQLite file in a temporary
	// directory); it must hold no thread.
	Store string
	// Program starts the bench's server process (and, with CLIProcess,
	// the CLI).
	Program Program
	// CPUProfile, when set, is where the server process writes a CPU
	// profile.
	CPUProfile string
	// Repeat is how many times each call is made (default 20).
	Repeat int
	// Concurrency is how many threads are created at once (default 32).
	Concurrency int
	// CLIProcess also times `cairn threads --limit 20` as a process of
	// its own (Program).
	CLIProcess bool
	// Progress, when set, receives a line every tenth of the threads.
	Progress io.Writer
}

// W4Result holds W4's figures.
type W4Result struct {
	Workload string `json:"workload"`
	Store    string `json:"store"`
	Threads  int    `json:"threads"`
	// Paused is the threads left at an interrupt.
	Paused int `json:"paused"`
	Repeat int `json:"repeat"`
	// CreateS is the time the threads took to create through the Go API
	// (store.CreateThread with the metadata, then one run of the chat
	// graph by the flow runner), Concurrency at a time.
	CreateS       float64 `json:"create_s"`
	ThreadsPerSec float64 `json:"threads_per_s"`
	Concurrency   int     `json:"create_concurrency"`
	// Sampled is the threads checked through GET /threads/{id}.
	Sampled int      `json:"sampled"`
	Calls   []W4Call `json:"calls"`
	// Bytes is what the store holds at the end; BytesPerThread its
	// database over the threads.
	Bytes              *StoreBytes `json:"store_bytes,omitempty"`
	BytesPerThread     float64     `json:"bytes_per_thread,omitempty"`
	ServerPeakRSSBytes int64       `json:"server_peak_rss_bytes"`
	CPUProfile         string      `json:"cpu_profile,omitempty"`
}

// W4Call is one call of W4, made Repeat times.
type W4Call struct {
	Name string `json:"name"`
	// Request is what was sent; Via how: "http" (the bench's server),
	// "in-process" (the code path of the CLI command: the store opened
	// read-only, the listing, the store closed) or "process" (the CLI
	// run as a process of its own, start-up included).
	Request string `json:"request"`
	Via     string `json:"via"`
	// FirstMS is the first call's time; MedianMS and P90MS those of all
	// the calls; ServerMedianMS the median time of the server's handler.
	FirstMS        float64 `json:"first_ms"`
	MedianMS       float64 `json:"median_ms"`
	P90MS          float64 `json:"p90_ms"`
	ServerMedianMS float64 `json:"server_median_ms,omitempty"`
	// Items is what the answer held (threads, interrupts, the count).
	Items int `json:"items"`
	// Error is how the server failed the call (its answer 5xx: a 504 past
	// its request timeout); the times are then those of the first call
	// and of the one that failed, and RunW4 returns the result with an
	// error.
	Error string `json:"error,omitempty"`
}

// w4ThreadID is the id of W4's thread i: a fixed UUID.
func w4ThreadID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// w4Paused reports whether W4's thread i is left at an interrupt: every
// 100th (the 100th, the 200th…).
func w4Paused(i int) bool { return (i+1)%100 == 0 }

// w4User is the metadata user of W4's thread i.
func w4User(i int) string { return "u" + strconv.Itoa(i%1000) }

// RunW4 creates W4's threads, then times and checks its calls.
func RunW4(ctx context.Context, cfg W4Config) (W4Result, error) {
	cfg.Threads = cmp.Or(cfg.Threads, 10000)
	cfg.Repeat = cmp.Or(cfg.Repeat, 20)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 32)
	if cfg.Threads < 1 || cfg.Repeat < 1 || cfg.Concurrency < 1 {
		return W4Result{}, fmt.Errorf("%w: threads, repeat and concurrency must be positive", store.ErrInvalidArgument)
	}
	url := cfg.Store
	if url == "" {
		dir, err := os.MkdirTemp("", "cairn-bench-w4-")
		if err != nil {
			return W4Result{}, err
		}
		defer os.RemoveAll(dir)
		url = "sqlite:" + filepath.Join(dir, "w4.db")
	}
	res := W4Result{Workload: "w4", Store: url, Threads: cfg.Threads, Repeat: cfg.Repeat, Concurrency: cfg.Concurrency, CPUProfile: cfg.CPUProfile}
	for i := range cfg.Threads {
		if w4Paused(i) {
			res.Paused++
		}
	}
	created, err := createW4(ctx, cfg, url, &res)
	if err != nil {
		return res, err
	}
	w := newW4Run(cfg, url, &res, created)
	// A call the server failed is in the result, which is returned
	// with the error.
	served := w.serve(ctx)
	if served != nil && !errors.Is(served, ErrCallFailed) {
		return res, served
	}
	after, database, method, err := tableSizes(ctx, url)
	if err != nil {
		return res, errors.Join(served, err)
	}
	if after != nil {
		res.Bytes = storeBytes(nil, after, database, method)
		res.BytesPerThread = float64(database) / float64(cfg.Threads)
	}
	return res, served
}

// ErrCallFailed: the server failed one of W4's calls (W4Call.Error).
var ErrCallFailed = errors.New("bench: the server failed a call")

// createW4 creates W4's threads through the Go API on a store that must
// hold none, and returns each one's creation time (Unix µs).
func createW4(ctx context.Context, cfg W4Config, url string, res *W4Result) ([]int64, error) {
	s, err := store.Open(ctx, url, store.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for _, err := range s.Threads(ctx, store.ThreadFilter{Limit: 1}) {
		if err == nil {
			err = fmt.Errorf("%w: %s holds threads already: W4 needs an empty store (a new SQLite file or PostgreSQL schema)", store.ErrConflict, url)
		}
		return nil, err
	}
	g, err := ChatGraph()
	if err != nil {
		return nil, err
	}
	run, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		return nil, err
	}
	pause, err := flow.NewRunner(g, s, flow.Options{InterruptBefore: []string{"agent"}})
	if err != nil {
		return nil, err
	}
	created := make([]int64, cfg.Threads)
	var next, done atomic.Int64
	errs := make([]error, cfg.Concurrency)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cfg.Threads && errs[w] == nil && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				r := run
				if w4Paused(i) {
					r = pause
				}
				created[i], errs[w] = createW4Thread(ctx, s, r, i)
				if n := done.Add(1); cfg.Progress != nil && cfg.Threads >= 10 && n%int64(cfg.Threads/10) == 0 {
					fmt.Fprintf(cfg.Progress, "w4: %d of %d threads, %.0f a second\n", n, cfg.Threads, float64(n)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if err := firstError(append(errs, ctx.Err())); err != nil {
		return nil, err
	}
	res.CreateS = time.Since(start).Seconds()
	res.ThreadsPerSec = float64(cfg.Threads) / res.CreateS
	return created, nil
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// createW4Thread creates W4's thread i with its metadata (what the server
// records of a thread a run of chat ran on, and the user) and runs one
// turn on it, which r pauses before the agent for every 100th thread.
func createW4Thread(ctx context.Context, s store.Store, r *flow.Runner, i int) (int64, error) {
	id := w4ThreadID(i)
	th, err := s.CreateThread(ctx, store.Thread{ID: id, Metadata: map[string]any{"user": w4User(i), "graph_id": ChatAssistantID, "assistant_id": ChatAssistantID}})
	if err != nil {
		return 0, fmt.Errorf("w4: thread %d: %w", i, err)
	}
	out, err := r.Invoke(ctx, id, state.Update{"messages": []state.Message{{Type: "human", Content: TurnText(1)}}})
	if err != nil {
		return 0, fmt.Errorf("w4: thread %d: %w", i, err)
	}
	want := state.StopSuccess
	if w4Paused(i) {
		want = state.StopInterrupt
	}
	if out.StopReason != want {
		return 0, fmt.Errorf("%w: w4: thread %d stopped with %s, want %s", ErrCheck, i, out.StopReason, want)
	}
	return th.CreatedAt.UnixMicro(), nil
}

// newW4Run is W4's calls on url, whose threads were created at created
// (Unix µs, by thread).
func newW4Run(cfg W4Config, url string, res *W4Result, created []int64) *w4Run {
	s := slices.Clone(created)
	slices.Sort(s)
	slices.Reverse(s)
	return &w4Run{cfg: cfg, url: url, res: res, newest: s[:min(10, len(s))], newest1000: s[min(999, len(s)-1)]}
}
