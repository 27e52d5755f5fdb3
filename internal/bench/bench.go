package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
