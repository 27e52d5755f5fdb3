package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
	"go.opentelemetry.io/otel/trace"
)

// Config selects a workload.
type Config struct {
	Workload   string // "w1" or "w2"
	Store      string // store URL; empty: a fresh SQLite file in a temporary directory
	Durability sqlite.Durability
	Steps      int // S
	Threads    int // W2 thread count
	// SnapshotRatio tunes the store (0: default).
	SnapshotRatio float64
	// NoCompression stores blobs uncompressed.
	NoCompression bool
	// Keyring, when set, encrypts the store at rest.
	Keyring *store.Keyring
	// FlowDurability is the runner's durability: sync (default), async or
	// exit.
	FlowDurability flow.Durability
	// Engine is "runner" (the flow runner, default) or "store" (the same
	// steps applied and committed by a plain loop: the store alone, to
	// measure the runner's overhead).
	Engine string
	// Stream, when set, runs the runner's threads through Runner.Stream in
	// these modes, the consumer reading every event, instead of Invoke.
	Stream []flow.StreamMode
	// TracerProvider receives the runner's spans (nil: the global no-op).
	TracerProvider trace.TracerProvider
	// MemProfile, when set, is a file to write heap profiles into: the
	// heap live when the writes end (MemProfile) and when the reads end
	// (MemProfile + ".reads").
	MemProfile string
}

// Result holds the figures W1.md asks for.
type Result struct {
	Workload       string  `json:"workload"`
	Stream         string  `json:"stream,omitempty"`
	Mode           string  `json:"mode,omitempty"`
	Engine         string  `json:"engine"`
	Store          string  `json:"store"`
	Durability     string  `json:"durability"`
	StepsPerThread int     `json:"steps_per_thread"`
	Threads        int     `json:"threads"`
	TotalMS        float64 `json:"total_ms"`
	USPerStep      float64 `json:"us_per_step"`
	StepsPerSec    float64 `json:"steps_per_sec"`
	FlowDurability string  `json:"flow_durability,omitempty"`
	USFirst10      float64 `json:"us_per_step_first10pct"`
	USLast10       float64 `json:"us_per_step_last10pct"`
	// AllocsPerStep and BytesPerStep are the Go heap allocations of the
	// writes, per step (the whole process: runner, store, driver).
	AllocsPerStep  float64 `json:"allocs_per_step"`
	BytesPerStep   float64 `json:"alloc_bytes_per_step"`
	DBPlusWALBytes int64   `json:"db_plus_wal_bytes"`
	CheckpointRows int64   `json:"checkpoint_rows"`
	Snapshots      int64   `json:"snapshot_rows"`
	GetStateMS     float64 `json:"get_state_ms"`
	// HeadDecodeMS is one parse of the head state's JSON into a state;
	// HeadDecodeBinaryMS one decode of its binary encoding (a snapshot's
	// form, values kept as JSON text); HeadColdMS a head load from a
	// store opened anew on the same database (no cached snapshot: a
	// fresh process's first load).
	HeadDecodeMS       float64 `json:"head_decode_ms,omitempty"`
	HeadDecodeBinaryMS float64 `json:"head_decode_binary_ms,omitempty"`
	HeadColdMS         float64 `json:"head_load_cold_ms,omitempty"`
	HeadStateBytes     int64   `json:"head_state_json_bytes,omitempty"`
	HistoryMS          float64 `json:"history_ms"`
	HistoryItems       int     `json:"history_items"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	// StartRSSBytes is the peak resident memory before the first step: the
	// binary, the runtime and the open store, what the workload's own
	// memory is counted from.
	StartRSSBytes int64 `json:"start_rss_bytes,omitempty"`
	// USMedian is the median step's time: what a step costs without the
	// pauses (WAL checkpoints, the machine's other work) that the mean
	// includes.
	USMedian float64 `json:"us_per_step_median"`
	// USP99 and USMax are the 99th percentile and the slowest of thread
	// "0"'s step times: the pauses the mean spreads over every step.
	USP99 float64 `json:"us_per_step_p99"`
	USMax float64 `json:"us_per_step_max"`
	// CPUUSPerStep is the process's CPU time (user and system) per step
	// while the threads were written: what the steps cost the machine,
	// whatever else it was doing.
	CPUUSPerStep float64 `json:"cpu_us_per_step"`
	// Encrypted: the store was encrypted at rest.
	Encrypted bool `json:"encrypted,omitempty"`
	// Concurrent holds W2's concurrent run.
	Concurrent *Result `json:"concurrent,omitempty"`
	// On PostgreSQL, W2's concurrent run also measures the server's own
	// ceiling for single-row transactions from as many clients as threads
	// (PGCeiling), and the run's steps a second against it.
	// On SQLite, W1 also measures the floor of a durable step in the same
	// run (SQLiteFloor: one INSERT of a 200-byte row and COMMIT, on the
	// same driver and pragmas), and its steps' cost against it.
	FloorUSPerCommit float64 `json:"floor_us_per_commit,omitempty"`
	RatioToFloor     float64 `json:"us_per_step_over_floor,omitempty"`
	// The same floor with its statements prepared once, and the step's
	// median against it.
	FloorPreparedUS       float64 `json:"floor_prepared_us_per_commit,omitempty"`
	MedianToFloorPrepared float64 `json:"median_step_over_floor_prepared,omitempty"`
	// The floor with SQLite's own WAL checkpoints at the store's WAL size,
	// and the step's mean against it.
	FloorBoundedUS      float64 `json:"floor_bounded_us_per_commit,omitempty"`
	RatioToFloorBounded float64 `json:"us_per_step_over_floor_bounded,omitempty"`
	PGCeilingTxPerSec   float64 `json:"pg_single_row_tx_per_sec,omitempty"`
	PGCeilingClients    int     `json:"pg_ceiling_clients,omitempty"`
	RatioToCeiling      float64 `json:"steps_per_sec_over_ceiling,omitempty"`
}

// Schema is W1's state: messages (messages reducer), count and last
// (replace).
var schemaOpts = []state.SchemaOption{
	state.WithField("messages", state.ReducerMessages),
	state.WithField("count", state.ReducerReplace),
	state.WithField("last", state.ReducerReplace),
}

// Content is C(t, i): "t<t>-step-<i>-" right-padded with x to 200 bytes.
func Content(thread string, i int) string {
	s := "t" + thread + "-step-" + strconv.Itoa(i) + "-"
	if len(s) >= 200 {
		return s[:200]
	}
	return s + strings.Repeat("x", 200-len(s))
}

// Run runs the configured workload.
func Run(ctx context.Context, cfg Config) (Result, error) {
	switch cfg.Workload {
	case "w1":
		if cfg.Steps <= 0 {
			cfg.Steps = 1000
		}
		return runOnce(ctx, cfg, []string{"0"}, false)
	case "w2":
		if cfg.Steps <= 0 {
			cfg.Steps = 100
		}
		if cfg.Threads <= 0 {
			cfg.Threads = 50
		}
		ids := make([]string, cfg.Threads)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		seq, err := runOnce(ctx, cfg, ids, false)
		if err != nil {
			return Result{}, err
		}
		seq.Mode = "sequential"
		if cfg.Store != "" {
			// The concurrent run needs the same thread ids on an empty store:
			// a second SQLite file, or, on a server, the threads removed.
			if scheme := store.Scheme(cfg.Store); scheme == "postgres" || scheme == "postgresql" {
				if err := deleteThreads(ctx, cfg.Store, ids); err != nil {
					return Result{}, err
				}
			} else {
				cfg.Store = concurrentURL(cfg.Store)
			}
		}
		conc, err := runOnce(ctx, cfg, ids, true)
		if err != nil {
			return Result{}, err
		}
		conc.Mode = "concurrent"
		if scheme := store.Scheme(cfg.Store); scheme == "postgres" || scheme == "postgresql" {
			tps, clients, err := PGCeiling(ctx, cfg.Store, cfg.Threads, 3*time.Second)
			if err != nil {
				return Result{}, err
			}
			conc.PGCeilingTxPerSec, conc.PGCeilingClients, conc.RatioToCeiling = tps, clients, conc.StepsPerSec/tps
		}
		seq.Concurrent = &conc
		return seq, nil
	}
	return Result{}, fmt.Errorf("%w: unknown workload %q (w1, w2)", store.ErrInvalidArgument, cfg.Workload)
}

// deleteThreads removes the benchmark's threads from a shared store.
func deleteThreads(ctx context.Context, url string, ids []string) error {
	s, err := store.Open(ctx, url, store.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	for _, id := range ids {
		if err := s.DeleteThread(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

func concurrentURL(u string) string {
	path, _, err := sqlite.ParseURL(u)
	if err != nil {
		return u
	}
	ext := filepath.Ext(path)
	return "sqlite:" + strings.TrimSuffix(path, ext) + "-concurrent" + ext
}

// threadRunner runs one thread of a workload, recording each step's time
// in times when it is not nil.
type threadRunner func(ctx context.Context, s store.Store, schema *state.Schema, thread string, steps int, times []time.Duration) error

// runOnce runs one workload on a fresh store in its phases: open, write
// the threads (one after another or all at once), then measure the head
// load, the history walk and what was stored.
func runOnce(ctx context.Context, cfg Config, threads []string, concurrent bool) (Result, error) {
	switch cfg.Engine {
	case "":
		cfg.Engine = "runner"
	case "runner", "store":
	default:
		return Result{}, fmt.Errorf("%w: engine %q (runner, store)", store.ErrInvalidArgument, cfg.Engine)
	}
	url := cfg.Store
	if url == "" {
		dir, err := os.MkdirTemp("", "cairn-bench-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		url = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	s, err := openEmpty(ctx, cfg, url, threads)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	schema := state.MustSchema(schemaOpts...)
	runThread, err := cfg.threadRunner(schema)
	if err != nil {
		return Result{}, err
	}
	res := cfg.result(url, len(threads))
	if err := cfg.measureWrites(ctx, s, schema, runThread, threads, concurrent, &res); err != nil {
		return Result{}, err
	}
	if sb, ok := s.Backend().(*sqlite.Backend); ok {
		db, wal := sb.Sizes()
		res.DBPlusWALBytes = db + wal
	}
	if err := measureReads(ctx, s, threads[0], cfg.Steps, &res); err != nil {
		return Result{}, err
	}
	if err := cfg.writeHeap(".reads"); err != nil {
		return Result{}, err
	}
	if err := countRows(ctx, s, threads, &res); err != nil {
		return Result{}, err
	}
	res.PeakRSSBytes = peakRSS()
	if len(threads) == 1 {
		if err := measureFloor(ctx, cfg, s, &res); err != nil {
			return Result{}, err
		}
	}
	// What follows measures the head against its own bytes; it is not part
	// of W1 (nor of its peak memory).
	head, err := s.Load(ctx, store.LoadRequest{Thread: threads[0]})
	if err != nil {
		return Result{}, err
	}
	if err := measureHead(head.State, &res); err != nil {
		return Result{}, err
	}
	if sc := store.Scheme(url); sc != "inmem" && sc != "memory" {
		if err := measureColdHead(ctx, cfg, url, threads[0], &res); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// measureWrites writes the threads and records their figures: time,
// CPU, allocations and step times, with the process's resident memory
// before the first step.
func (cfg Config) measureWrites(ctx context.Context, s *store.Engine, schema *state.Schema, runThread threadRunner, threads []string, concurrent bool, res *Result) error {
	stepTimes := make([]time.Duration, cfg.Steps)
	var m0, m1 runtime.MemStats
	res.StartRSSBytes = peakRSS()
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	if err := writeThreads(ctx, s, schema, runThread, cfg.Steps, threads, concurrent, stepTimes); err != nil {
		return err
	}
	// The snapshots written after their commits are the run's work too.
	s.WaitSnapshots()
	total := time.Since(start)
	runtime.ReadMemStats(&m1)
	if err := cfg.writeHeap(""); err != nil {
		return err
	}
	steps := float64(cfg.Steps * len(threads))
	res.CPUUSPerStep = float64((cpuTime() - cpu0).Microseconds()) / steps
	res.AllocsPerStep, res.BytesPerStep = float64(m1.Mallocs-m0.Mallocs)/steps, float64(m1.TotalAlloc-m0.TotalAlloc)/steps
	res.TotalMS = ms(total)
	res.USPerStep = float64(total.Microseconds()) / steps
	res.StepsPerSec = steps / total.Seconds()
	tenth := max(1, cfg.Steps/10)
	res.USFirst10 = meanUS(stepTimes[:tenth])
	res.USLast10 = meanUS(stepTimes[len(stepTimes)-tenth:])
	res.USMedian = medianUS(stepTimes)
	res.USP99, res.USMax = quantileUS(stepTimes, 0.99), quantileUS(stepTimes, 1)
	return nil
}

// writeHeap writes the live heap to cfg.MemProfile+suffix, when set.
func (cfg Config) writeHeap(suffix string) error {
	if cfg.MemProfile == "" {
		return nil
	}
	f, err := os.Create(cfg.MemProfile + suffix)
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	return f.Close()
}

// measureFloor measures, on a SQLite store, the floor of a durable step
// beside the store's file (min(S, 3000) commits) and the run's ratio to it.
func measureFloor(ctx context.Context, cfg Config, s *store.Engine, res *Result) error {
	sb, ok := s.Backend().(*sqlite.Backend)
	if !ok {
		return nil
	}
	dir, err := os.MkdirTemp(filepath.Dir(sb.Path()), "cairn-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	floor, err := SQLiteFloor(ctx, dir, cfg.Durability, min(cfg.Steps, 3000))
	if err != nil {
		return err
	}
	res.FloorUSPerCommit, res.RatioToFloor = floor.Plain, res.USPerStep/floor.Plain
	res.FloorPreparedUS, res.MedianToFloorPrepared = floor.Prepared, res.USMedian/floor.Prepared
	res.FloorBoundedUS, res.RatioToFloorBounded = floor.Bounded, res.USPerStep/floor.Bounded
	return nil
}

// openEmpty opens the benchmark's store and checks that none of its
// threads exist yet.
func openEmpty(ctx context.Context, cfg Config, url string, threads []string) (*store.Engine, error) {
	s, err := store.Open(ctx, url, store.OpenOptions{Store: store.Options{SnapshotRatio: cfg.SnapshotRatio, NoCompression: cfg.NoCompression, Keyring: cfg.Keyring}, Durability: string(cfg.Durability)})
	if err != nil {
		return nil, err
	}
	for _, id := range threads {
		if _, err := s.Thread(ctx, id); err == nil {
			s.Close()
			return nil, fmt.Errorf("%w: thread %q already exists in %s; benchmarks need an empty store", store.ErrConflict, id, url)
		} else if !errors.Is(err, store.ErrNotFound) {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// threadRunner is how the configured engine writes a thread: through the
// flow runner, or straight into the store.
func (cfg Config) threadRunner(schema *state.Schema) (threadRunner, error) {
	if cfg.Engine != "runner" {
		return runThreadStore, nil
	}
	g, err := w1Graph(schema, cfg.Steps)
	if err != nil {
		return nil, err
	}
	fd, err := flow.ParseDurability(string(cfg.FlowDurability))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, s store.Store, _ *state.Schema, thread string, steps int, times []time.Duration) error {
		return runThreadFlow(ctx, s, g, flow.Options{Durability: fd, TracerProvider: cfg.TracerProvider}, cfg.Stream, thread, steps, times)
	}, nil
}

// result is the part of a Result the configuration decides.
func (cfg Config) result(url string, threads int) Result {
	dur := cfg.Durability
	if dur == "" {
		dur = sqlite.DurabilitySync
		if _, d, err := sqlite.ParseURL(url); err == nil && d != "" {
			dur = d
		}
	}
	res := Result{Workload: cfg.Workload, Stream: joinModes(cfg.Stream), Engine: cfg.Engine, Store: url, Durability: string(dur), StepsPerThread: cfg.Steps, Threads: threads, Encrypted: cfg.Keyring != nil}
	switch store.Scheme(url) {
	case "inmem", "memory":
		res.Durability = "none"
	case "postgres", "postgresql":
		res.Durability = "server (synchronous_commit)"
	}
	if cfg.Engine == "runner" {
		res.FlowDurability = string(cfg.FlowDurability)
		if res.FlowDurability == "" {
			res.FlowDurability = string(flow.DurabilitySync)
		}
	}
	return res
}

func joinModes(modes []flow.StreamMode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ",")
}

// writeThreads writes every thread, one after another or all at once; the
// first thread's step times go to stepTimes.
func writeThreads(ctx context.Context, s store.Store, schema *state.Schema, run threadRunner, steps int, threads []string, concurrent bool, stepTimes []time.Duration) error {
	timesOf := func(i int) []time.Duration {
		if i == 0 {
			return stepTimes
		}
		return nil
	}
	if !concurrent {
		for i, id := range threads {
			if err := run(ctx, s, schema, id, steps, timesOf(i)); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(threads))
	for i, id := range threads {
		wg.Go(func() { errs[i] = run(ctx, s, schema, id, steps, timesOf(i)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureReads times loading thread's head and walking its whole history
// with every state materialised. Each phase starts from a collected heap,
// as Go's benchmarks do, so one phase's garbage is not charged to the next.
func measureReads(ctx context.Context, s store.Store, thread string, steps int, res *Result) error {
	runtime.GC()
	t0 := time.Now()
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return fmt.Errorf("load head: %w", err)
	}
	res.GetStateMS = ms(time.Since(t0))
	if n, _ := head.State.ListLen("messages"); n != steps {
		return fmt.Errorf("head state of thread %s has %d messages, want %d", thread, n, steps)
	}
	runtime.GC()
	t0 = time.Now()
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true, PageSize: 256}) {
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if !cp.HasState {
			return fmt.Errorf("history: checkpoint %d has no state", cp.Seq)
		}
		res.HistoryItems++
	}
	res.HistoryMS = ms(time.Since(t0))
	return nil
}

// measureHead times one decode of the head state's bytes: its JSON
// parsed into a state, and its binary encoding (a snapshot's form)
// decoded.
func measureHead(d state.Doc, res *Result) error {
	js := d.AppendJSON(nil)
	res.HeadStateBytes = int64(len(js))
	runtime.GC()
	t0 := time.Now()
	if _, err := state.ParseDoc(js); err != nil {
		return fmt.Errorf("parse head: %w", err)
	}
	res.HeadDecodeMS = ms(time.Since(t0))
	enc := state.EncodeDoc(nil, d)
	runtime.GC()
	t0 = time.Now()
	if _, err := state.DecodeDoc(enc, false); err != nil {
		return fmt.Errorf("decode head: %w", err)
	}
	res.HeadDecodeBinaryMS = ms(time.Since(t0))
	return nil
}

// measureColdHead times a head load from a store opened anew on url.
func measureColdHead(ctx context.Context, cfg Config, url, thread string, res *Result) error {
	s, err := store.Open(ctx, url, store.OpenOptions{Store: store.Options{Keyring: cfg.Keyring}, Durability: string(cfg.Durability)})
	if err != nil {
		return err
	}
	defer s.Close()
	runtime.GC()
	t0 := time.Now()
	if _, err := s.Load(ctx, store.LoadRequest{Thread: thread}); err != nil {
		return fmt.Errorf("cold head load: %w", err)
	}
	res.HeadColdMS = ms(time.Since(t0))
	return nil
}

// countRows counts the checkpoint rows and snapshots the threads stored.
func countRows(ctx context.Context, s store.Store, threads []string, res *Result) error {
	for _, id := range threads {
		for cp, err := range s.History(ctx, store.HistoryRequest{Thread: id, PageSize: 1000}) {
			if err != nil {
				return err
			}
			res.CheckpointRows++
			if cp.Snapshot {
				res.Snapshots++
			}
		}
	}
	return nil
}

// w1Graph is W1's graph: START → step; after step, back to step while
// count < S, else END.
func w1Graph(schema *state.Schema, steps int) (*flow.Compiled, error) {
	g := flow.NewGraph(schema).
		AddNode("step", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var count int
			if err := d.Get("count", &count); err != nil {
				return nil, err
			}
			info, _ := flow.Info(ctx)
			i := count + 1
			c := Content(info.Thread, i)
			return state.Update{
				"messages": state.Message{ID: info.Thread + "-m" + strconv.Itoa(i), Role: "assistant", Content: c},
				"count":    i,
				"last":     c,
			}, nil
		}).
		AddEdge(flow.START, "step").
		AddRouter("step", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var count int
			if err := d.Get("count", &count); err != nil {
				return nil, err
			}
			if count < steps {
				return flow.To("step"), nil
			}
			return flow.To(flow.END), nil
		})
	return g.Compile()
}

// runThreadFlow runs one W1 thread through the flow runner, timing each
// step of thread 0 by the runner's step events.
func runThreadFlow(ctx context.Context, s store.Store, g *flow.Compiled, opts flow.Options, modes []flow.StreamMode, thread string, steps int, times []time.Duration) error {
	opts.RecursionLimit = -1 // W1 runs thousands of steps
	if times != nil {
		// Steps are timed by their commits, not by the runner's events: an
		// observer would make the runner encode every event's payload, work
		// a run without one never does.
		s = &stepClock{Store: s, times: times}
	}
	r, err := flow.NewRunner(g, s, opts)
	if err != nil {
		return err
	}
	input := state.Update{"messages": []state.Message{}, "count": 0, "last": ""}
	var res flow.Result
	if len(modes) > 0 {
		wantState := slices.Contains(modes, flow.StreamValues) || slices.Contains(modes, flow.StreamDebug)
		res, err = consume(r.Stream(ctx, thread, input, flow.StreamOptions{Modes: modes}), wantState)
	} else {
		res, err = r.Invoke(ctx, thread, input)
	}
	if err != nil {
		return fmt.Errorf("thread %s: %w", thread, err)
	}
	if res.StopReason != state.StopSuccess || res.Progress.Steps != steps {
		return fmt.Errorf("thread %s stopped with %s after %d steps", thread, res.StopReason, res.Progress.Steps)
	}
	return nil
}

// consume reads a stream to its end, as a consumer that looks at every
// event would, and returns the run's result.
func consume(events iter.Seq2[flow.Event, error], wantState bool) (flow.Result, error) {
	seen := 0
	for ev, err := range events {
		if err != nil {
			return flow.Result{}, err
		}
		if ev.State != nil && ev.State.Len() > 0 {
			seen++
		}
		if ev.Result != nil {
			if wantState && seen == 0 {
				return *ev.Result, fmt.Errorf("the stream carried no state")
			}
			return *ev.Result, nil
		}
	}
	return flow.Result{}, fmt.Errorf("the stream ended without a result")
}

// stepClock times a run's steps by its commits: step i's time runs from
// the commit before it (the input's, for the first) to its own.
type stepClock struct {
	store.Store
	times []time.Duration
	last  time.Time
	n     int // checkpoints committed
}

func (c *stepClock) Append(ctx context.Context, cp store.Checkpoint) (store.Checkpoint, error) {
	out, err := c.Store.Append(ctx, cp)
	now := time.Now()
	if i := c.n - 1; i >= 0 && i < len(c.times) {
		c.times[i] = now.Sub(c.last)
	}
	c.n++
	c.last = now
	return out, err
}

// runThreadStore runs one W1 thread as a plain loop over the store: the
// input checkpoint, then S steps of the node "step", each committed before
// the next starts.
func runThreadStore(ctx context.Context, s store.Store, schema *state.Schema, thread string, steps int, times []time.Duration) error {
	doc, patch, err := schema.Apply(state.EmptyDoc(), state.Update{"messages": []state.Message{}, "count": 0, "last": ""})
	if err != nil {
		return err
	}
	cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Patch: patch, State: doc, Meta: store.Meta{Source: "input", Next: []string{"step"}}})
	if err != nil {
		return err
	}
	head := cp.Seq
	nodes := []string{"step"}
	next := []string{"step"}
	for count := 0; count < steps; {
		t0 := time.Now()
		// The node: i = count + 1.
		i := count + 1
		c := Content(thread, i)
		upd := state.Update{
			"messages": state.Message{ID: thread + "-m" + strconv.Itoa(i), Role: "assistant", Content: c},
			"count":    i,
			"last":     c,
		}
		nd, patch, err := schema.Apply(doc, upd)
		if err != nil {
			return err
		}
		// The router: back to step while count < S, else END.
		meta := store.Meta{Source: "step", Next: next}
		if i >= steps {
			meta.Next = nil
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Nodes: nodes, Patch: patch, State: nd, Meta: meta})
		if err != nil {
			return fmt.Errorf("thread %s step %d: %w", thread, i, err)
		}
		head, doc, count = cp.Seq, nd, i
		if times != nil {
			times[i-1] = time.Since(t0)
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func meanUS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / float64(len(ds))
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS reads the process's peak resident set size (VmHWM) on Linux; 0
// elsewhere.
func peakRSS() int64 { return peakRSSOf("self") }

// peakRSSOf reads the peak resident set size (VmHWM) of process pid
// ("self": this one) on Linux; 0 elsewhere.
func peakRSSOf(pid string) int64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
