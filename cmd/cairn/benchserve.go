package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/internal/bench"
)

// benchServeCmd is the hidden subcommand W3 and W4 start their server
// with: the chat assistant served over a store, each request timed.
func (a *app) benchServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:                bench.ServeCommand + " --store URL [--addr HOST:PORT] [--cpuprofile FILE]",
		Short:              "The server process of cairn bench w3 and w4",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := bench.ServeMain(cmd.Context(), args, a.stdout)
			return argError(err)
		},
	}
}

// benchLong is cairn bench's description.
const benchLong = "Runs W1 (one thread, --steps steps, a durable checkpoint after each) or W2 (--threads threads of --steps steps, " +
	"sequential then concurrent). Without --store it uses a fresh SQLite file in a temporary directory. " +
	"W3 (--turns turns of a chat assistant on one thread through the LangGraph API: runs/wait, runs/stream or both) and " +
	"W4 (--threads threads, then the thread listings, count, pending interrupts and cairn threads, timed) serve the chat " +
	"assistant from a cairn process of their own over the store (--cpuprofile profiles that process); W3 --url drives " +
	"an already-running server instead (the LangGraph JS dev server of bench/http/peer, --assistant chat)."

// serverFlags are the flags of cairn bench w3 and w4.
type serverFlags struct {
	turns, threads, repeat, concurrency, pid int
	series, url, assistant                   string
}

func (f *serverFlags) bind(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.turns, "turns", 1000, "w3: turns on the thread")
	cmd.Flags().StringVar(&f.series, "series", "both", "w3: wait (POST /threads/{id}/runs/wait), stream (POST /threads/{id}/runs/stream) or both")
	cmd.Flags().StringVar(&f.url, "url", "", "w3: drive this already-running server instead of the bench's own (no store bytes, no server times)")
	cmd.Flags().StringVar(&f.assistant, "assistant", "", "w3: a chat agent file (kind: chat, FILE.md) the bench's own server serves instead of its Go graph; with --url, the assistant id the server serves the chat as (default chat)")
	cmd.Flags().IntVar(&f.pid, "pid", 0, "w3 --url: the server's process id, for its peak RSS and CPU")
	cmd.Flags().IntVar(&f.repeat, "repeat", 20, "w4: how many times each call is made")
	cmd.Flags().IntVar(&f.concurrency, "concurrency-create", 32, "w4: threads created at once")
}

// benchServer runs W3 or W4 (workload) with the --threads of w4.
func (a *app) benchServer(ctx context.Context, workload string, f serverFlags, threads int, storeURL, cpuProfile string) error {
	if workload == "w4" {
		f.threads = threads
		return a.benchW4(ctx, f, storeURL, cpuProfile)
	}
	return a.benchW3(ctx, f, storeURL, cpuProfile)
}

// startCPUProfile starts a CPU profile of this process into path (none
// when empty) and returns what stops it.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// selfProgram runs this cairn binary with args. A test binary is not
// cairn: started again, it would run the tests (TestBenchServe drives
// bench-serve through the tests' own child processes instead).
func selfProgram() (bench.Program, error) {
	if testing.Testing() {
		return nil, fmt.Errorf("%w: cairn bench w3 and w4 start the cairn binary again, which a test binary is not", bench.ErrServer)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: the cairn binary: %w", err)
	}
	return func(args ...string) *exec.Cmd { return exec.Command(exe, args...) }, nil
}

// benchW3 runs W3 and prints its figures.
func (a *app) benchW3(ctx context.Context, f serverFlags, storeURL, cpuProfile string) error {
	cfg := bench.W3Config{Turns: f.turns, Store: storeURL, URL: f.url, Assistant: f.assistant, PID: f.pid, CPUProfile: cpuProfile, Progress: a.stderr}
	if f.url == "" && f.assistant != "" {
		if !strings.EqualFold(filepath.Ext(f.assistant), ".md") {
			return usagef("--assistant %q: without --url, a chat agent file (.md)", f.assistant)
		}
		cfg.Assistant, cfg.AssistantFile = "", f.assistant
	}
	switch f.series {
	case "both":
	case "wait", "stream":
		cfg.Series = []string{f.series}
	default:
		return usagef("--series %q: want wait, stream or both", f.series)
	}
	if f.turns < 0 {
		return usagef("--turns %d: want at least 1", f.turns)
	}
	if f.url == "" && f.pid != 0 {
		return usagef("--pid is for an external server (--url)")
	}
	if f.url == "" {
		p, err := selfProgram()
		if err != nil {
			return err
		}
		cfg.Program = p
	}
	res, err := bench.RunW3(ctx, cfg)
	if err != nil {
		return argError(err)
	}
	res.Store = hideSecrets(res.Store)
	for i := range res.Series {
		res.Series[i].Store = hideSecrets(res.Series[i].Store)
	}
	if a.json {
		return json.NewEncoder(a.stdout).Encode(res)
	}
	printW3(a, res)
	return nil
}

func printW3(a *app, r bench.W3Result) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, s := range r.Series {
		where := s.Store
		if r.URL != "" {
			where = r.URL
		}
		who := r.Assistant
		if r.AssistantFile != "" {
			who += " (" + r.AssistantFile + ")"
		}
		fmt.Fprintf(tw, "w3 %s\tassistant %s, %s, %d turns on thread %s, %d connection(s), %.1f s\n", s.Series, who, where, r.Turns, s.Thread, s.Connections, s.TotalS)
		rows := [][2]string{{"turn (client)", summaryText(s.Latency)}}
		if s.Server != nil {
			rows = append(rows, [2]string{"server handler", summaryText(s.Server)})
		}
		if s.Run != nil {
			rows = append(rows, [2]string{"  to the outcome", summaryText(s.Run)}, [2]string{"  the answer", summaryText(s.Answer)})
		}
		if s.Bytes != nil {
			rows = append(rows, [2]string{"store per turn", fmt.Sprintf("checkpoints %.0f B, everything else %.0f B (%.1f×); database %s (%s)",
				s.CheckpointBytesPerTurn, s.OtherBytesPerTurn, s.Bytes.OtherOverCheckpoints, humanBytes(s.Bytes.DatabaseBytes), s.Bytes.Method)})
			var parts []string
			for _, t := range s.Bytes.Tables {
				if t.Added != 0 {
					parts = append(parts, fmt.Sprintf("%s %.0f", t.Table, float64(t.Added)/float64(r.Turns)))
				}
			}
			rows = append(rows, [2]string{"by table (B/turn)", strings.Join(parts, ", ")})
		}
		if s.ServerPeakRSSBytes > 0 || s.ServerCPUMS > 0 {
			rows = append(rows, [2]string{"server", fmt.Sprintf("peak RSS %s, CPU %.2f ms a turn", humanBytes(s.ServerPeakRSSBytes), s.ServerCPUPerTurnMS)})
		}
		rows = append(rows, [2]string{"checked", fmt.Sprintf("every answer holds its reply; the state has %d messages; the last answer %s", s.StateMessages, humanBytes(int64(s.LastAnswerBytes)))})
		for _, row := range rows {
			fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
		}
	}
	tw.Flush()
}

func summaryText(s *bench.Summary) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("median first 10%% %.2f ms, last 10%% %.2f ms (%.2f×); p50 %.2f, p99 %.2f, max %.2f ms", s.First10, s.Last10, s.Ratio, s.P50, s.P99, s.Max)
}

// benchW4 runs W4 and prints its figures.
func (a *app) benchW4(ctx context.Context, f serverFlags, storeURL, cpuProfile string) error {
	if f.url != "" || f.pid != 0 || f.assistant != "" {
		return usagef("--url, --pid and --assistant are for w3; w4 creates its threads in its own store")
	}
	if f.threads < 0 || f.repeat < 0 || f.concurrency < 0 {
		return usagef("--threads, --repeat and --concurrency must be positive")
	}
	p, err := selfProgram()
	if err != nil {
		return err
	}
	cfg := bench.W4Config{Threads: f.threads, Store: storeURL, Program: p, CPUProfile: cpuProfile, Repeat: f.repeat, Concurrency: f.concurrency, CLIProcess: true, Progress: a.stderr}
	res, err := bench.RunW4(ctx, cfg)
	if err != nil && !errors.Is(err, bench.ErrCallFailed) {
		return argError(err)
	}
	// A call the server failed is printed with the others, then the
	// command fails.
	res.Store = hideSecrets(res.Store)
	if a.json {
		return errors.Join(json.NewEncoder(a.stdout).Encode(res), err)
	}
	return errors.Join(a.printW4(res), err)
}

func (a *app) printW4(res bench.W4Result) error {
	fmt.Fprintf(a.stdout, "w4: %d threads (%d paused) on %s: created in %.1f s (%.0f a second, %d at once); %d checked through GET /threads/{id}\n",
		res.Threads, res.Paused, res.Store, res.CreateS, res.ThreadsPerSec, res.Concurrency, res.Sampled)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  call\tvia\tmedian ms\tp90 ms\tfirst ms\tserver median ms\titems\n")
	for _, c := range res.Calls {
		if c.Error != "" {
			fmt.Fprintf(tw, "  %s\t%s\tfailed after %.0f ms: %s\n", c.Request, c.Via, c.MedianMS, c.Error)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", c.Request, c.Via, c.MedianMS, c.P90MS, c.FirstMS, c.ServerMedianMS, c.Items)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Bytes != nil {
		fmt.Fprintf(a.stdout, "  store: %s, %.0f B a thread (%s); server peak RSS %s\n", humanBytes(res.Bytes.DatabaseBytes), res.BytesPerThread, res.Bytes.Method, humanBytes(res.ServerPeakRSSBytes))
	}
	return nil
}
