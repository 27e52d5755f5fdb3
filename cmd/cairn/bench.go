package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/bench"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func (a *app) benchCmd() *cobra.Command {
	var cfg bench.Config
	var durability, flowDurability, cpuProfile, streamModes string
	var wb workersBench
	var levels string
	var be benchEncryption
	var sf serverFlags
	cmd := &cobra.Command{
		Use:   "bench w1|w2|w3|w4|workers",
		Short: "Run the benchmark workloads of docs/bench/W1.md",
		Long:  benchLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Workload = args[0]
			var storeURL string
			if cmd.Flags().Changed("store") {
				storeURL = a.storeURL
			}
			switch cfg.Workload {
			case "workers":
				if err := wb.parse(levels); err != nil {
					return err
				}
				return a.benchWorkers(cmd.Context(), wb)
			case "w3", "w4":
				return a.benchServer(cmd.Context(), cfg.Workload, sf, cfg.Threads, storeURL, cpuProfile)
			}
			if cfg.Workload != "w1" && cfg.Workload != "w2" {
				return usagef("unknown workload %q: want w1, w2, w3, w4 or workers", args[0])
			}
			if cfg.Steps < 0 || cfg.Threads < 0 {
				return usagef("--steps and --threads must be positive")
			}
			d, err := sqlite.ParseDurability(durability)
			if err != nil {
				return &usageError{fmt.Errorf("--durability: %w", err)}
			}
			cfg.Durability = d
			fd, err := flow.ParseDurability(flowDurability)
			if err != nil {
				return &usageError{fmt.Errorf("--flow-durability: %w", err)}
			}
			cfg.FlowDurability = fd
			if cfg.Stream, err = parseStreamModes(streamModes); err != nil {
				return usagef("--stream: %v", errors.Unwrap(err))
			}
			tp, stop, err := a.tracing(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			cfg.TracerProvider = tp
			cfg.Store = storeURL
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			return a.benchRun(cmd.Context(), cfg, be)
		},
	}
	be.flags(cmd)
	cmd.Flags().IntVar(&cfg.Steps, "steps", 0, "steps per thread S (default 1000 for w1, 100 for w2)")
	cmd.Flags().IntVar(&cfg.Threads, "threads", 0, "threads for w2 (default 50) and w4 (default 10000)")
	sf.bind(cmd)
	cmd.Flags().StringVar(&durability, "durability", "sync", "sync (WAL, synchronous=NORMAL) or strict (fsync every commit)")
	cmd.Flags().Float64Var(&cfg.SnapshotRatio, "snapshot-ratio", 0, "store tuning: snapshot when patch bytes exceed ratio × snapshot size (default 1)")
	cmd.Flags().BoolVar(&cfg.NoCompression, "no-compression", false, "store blobs uncompressed")
	cmd.Flags().StringVar(&cfg.Engine, "engine", "runner", "runner (the flow runner) or store (a plain loop over the store, to measure the runner's overhead)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (w3, w4: of the server process; w3 with both series: FILE.wait and FILE.stream)")
	cmd.Flags().StringVar(&cfg.MemProfile, "memprofile", "", "write the heap live when the writes end to this file, and when the reads end to this file + .reads")
	cmd.Flags().StringVar(&streamModes, "stream", "", "run through Runner.Stream in these modes (comma-separated: values, updates, messages, custom, checkpoints, tasks, debug), reading every event")
	cmd.Flags().StringVar(&levels, "workers", "1,2,4,8", "workers: the numbers of worker processes to measure, in turn")
	cmd.Flags().IntVar(&wb.perWorker, "runs-per-worker", 40, "workers: runs queued per worker process")
	cmd.Flags().IntVar(&wb.concurrency, "concurrency", 4, "workers: runs each worker runs at once")
	cmd.Flags().DurationVar(&wb.delay, "delay", 20*time.Millisecond, "workers: the latency of each of the agent's five model calls")
	cmd.Flags().StringVar(&flowDurability, "flow-durability", "sync", "the runner's durability: sync (commit each step before the next), async (commit in the background, in order), exit (commit when the run stops)")
	return cmd
}

// printBenchResult shows a benchmark's figures, store URLs without their
// secrets: as JSON with --json, else as tables.
func (a *app) printBenchResult(res bench.Result) error {
	res.Store = hideSecrets(res.Store)
	if res.Concurrent != nil {
		res.Concurrent.Store = hideSecrets(res.Concurrent.Store)
	}
	if a.json {
		return json.NewEncoder(a.stdout).Encode(res)
	}
	printBench(a, res)
	if res.Concurrent != nil {
		fmt.Fprintln(a.stdout)
		printBench(a, *res.Concurrent)
	}
	return nil
}

func printBench(a *app, r bench.Result) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	title := r.Workload
	if r.Mode != "" {
		title += " " + r.Mode
	}
	if r.Encrypted {
		title += " encrypted"
	}
	fmt.Fprintf(tw, "%s\t%s, %s, durability %s, %d thread(s) × %d steps\n", title, r.Engine, r.Store, r.Durability, r.Threads, r.StepsPerThread)
	rows := [][2]string{
		{"total", fmt.Sprintf("%.1f ms", r.TotalMS)},
		{"per step", fmt.Sprintf("%.1f µs (first 10%%: %.1f µs, last 10%%: %.1f µs), %.0f steps/s; %.0f allocations, %s allocated", r.USPerStep, r.USFirst10, r.USLast10, r.StepsPerSec, r.AllocsPerStep, humanBytes(int64(r.BytesPerStep)))},
		{"step times", fmt.Sprintf("median %.1f µs, 99th percentile %.1f µs, slowest %.1f µs", r.USMedian, r.USP99, r.USMax)},
		{"on disk", fmt.Sprintf("%s (db + WAL), %d checkpoints, %d snapshots", humanBytes(r.DBPlusWALBytes), r.CheckpointRows, r.Snapshots)},
		{"head load", fmt.Sprintf("%.2f ms (a store opened anew: %.2f ms); the head's %s of JSON parse in %.2f ms (binary form: %.2f ms)", r.GetStateMS, r.HeadColdMS, humanBytes(r.HeadStateBytes), r.HeadDecodeMS, r.HeadDecodeBinaryMS)},
		{"history walk", fmt.Sprintf("%.1f ms for %d states", r.HistoryMS, r.HistoryItems)},
		{"peak RSS", humanBytes(r.PeakRSSBytes) + " (" + humanBytes(r.StartRSSBytes) + " before the first step)"},
	}
	if r.FloorUSPerCommit > 0 {
		rows = append(rows, [2]string{"SQLite floor", fmt.Sprintf("%.1f µs per INSERT of a 200-byte row + COMMIT, same driver and pragmas; a step costs %.2f× that", r.FloorUSPerCommit, r.RatioToFloor)},
			[2]string{"prepared floor", fmt.Sprintf("%.1f µs with the statements prepared once; the median step costs %.2f× that", r.FloorPreparedUS, r.MedianToFloorPrepared)},
			[2]string{"bounded floor", fmt.Sprintf("%.1f µs with SQLite's own checkpoints at the store's WAL size; a step costs %.2f× that", r.FloorBoundedUS, r.RatioToFloorBounded)})
	}
	if r.PGCeilingTxPerSec > 0 {
		rows = append(rows, [2]string{"server ceiling", fmt.Sprintf("%.0f single-row transactions/s from %d clients; this run: %.2f× that", r.PGCeilingTxPerSec, r.PGCeilingClients, r.RatioToCeiling)})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
	}
	tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// parseStreamModes reads a comma-separated list of stream modes ("" for none).
func parseStreamModes(s string) ([]flow.StreamMode, error) {
	if s == "" {
		return nil, nil
	}
	var out []flow.StreamMode
	for _, m := range strings.Split(s, ",") {
		mode := flow.StreamMode(strings.TrimSpace(m))
		if !slices.Contains(flow.StreamModes(), mode) {
			return nil, usagef("unknown stream mode %q (values, updates, messages, custom, checkpoints, tasks, debug)", mode)
		}
		out = append(out, mode)
	}
	return out, nil
}
