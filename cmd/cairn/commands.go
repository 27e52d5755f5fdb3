package main

import (
	"context"
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
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/tracefile"
)

// checkpointJSON is how the CLI prints a checkpoint.
type checkpointJSON struct {
	Thread    string          `json:"thread"`
	Namespace string          `json:"ns,omitempty"`
	Seq       int64           `json:"seq"`
	Parent    int64           `json:"parent"`
	Status    store.Status    `json:"status"`
	Nodes     []string        `json:"nodes,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Snapshot  bool            `json:"snapshot,omitempty"`
	Meta      store.Meta      `json:"meta"`
	Patch     state.Patch     `json:"patch,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	// PrunedBefore, in a history, marks a checkpoint whose parent a prune
	// deleted: what is left of its branch begins there.
	PrunedBefore bool `json:"pruned_before,omitempty"`
}

func toJSON(cp store.Checkpoint) checkpointJSON {
	out := checkpointJSON{Thread: cp.Thread, Namespace: cp.Namespace, Seq: cp.Seq, Parent: cp.Parent, Status: cp.Status,
		Nodes: cp.Nodes, CreatedAt: cp.CreatedAt.UTC(), Snapshot: cp.Snapshot, Meta: cp.Meta, Patch: cp.Patch}
	if cp.HasState {
		out.State = cp.State.AppendJSON(nil)
	}
	return out
}

func (a *app) threadsCmd() *cobra.Command {
	var tenant string
	var meta []string
	var limit int
	cmd := &cobra.Command{
		Use:   "threads",
		Short: "List threads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter := store.ThreadFilter{Tenant: tenant, Limit: limit}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--meta %q: want key=value", kv)
				}
				if filter.Metadata == nil {
					filter.Metadata = map[string]any{}
				}
				var parsed any
				if json.Unmarshal([]byte(v), &parsed) != nil {
					parsed = v // a bare word is a string
				}
				filter.Metadata[k] = parsed
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			var list []store.Thread
			var damaged []error // a damaged thread record hides no other thread
			for t, err := range s.Threads(cmd.Context(), filter) {
				var ce *store.CorruptError
				switch {
				case errors.As(err, &ce) && ce.Thread != "":
					damaged = append(damaged, err)
				case err != nil:
					return argError(err)
				default:
					list = append(list, t)
				}
			}
			if err := a.printThreads(list); err != nil {
				return err
			}
			for _, err := range damaged {
				fmt.Fprintf(a.stderr, "cairn: %v\n", err)
			}
			if len(damaged) > 0 {
				return fmt.Errorf("%w: %d thread records damaged (listed above)", store.ErrCorrupt, len(damaged))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only threads of this tenant")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "only threads whose metadata key equals value (key=value, repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many threads")
	return cmd
}

// printThreads prints a thread listing as a table or JSON.
func (a *app) printThreads(list []store.Thread) error {
	if a.json {
		type threadJSON struct {
			ID        string         `json:"id"`
			Tenant    string         `json:"tenant,omitempty"`
			Head      int64          `json:"head"`
			CreatedAt time.Time      `json:"created_at"`
			UpdatedAt time.Time      `json:"updated_at"`
			Metadata  map[string]any `json:"metadata,omitempty"`
		}
		out := make([]threadJSON, 0, len(list))
		for _, t := range list {
			out = append(out, threadJSON{t.ID, t.Tenant, t.Head, t.CreatedAt.UTC(), t.UpdatedAt.UTC(), t.Metadata})
		}
		return a.printJSON(out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tHEAD\tUPDATED\tTENANT")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.ID, t.Head, t.UpdatedAt.Local().Format(time.DateTime), t.Tenant)
	}
	return tw.Flush()
}

func (a *app) stateCmd() *cobra.Command {
	var at int64
	var ns string
	cmd := &cobra.Command{
		Use:   "state THREAD",
		Short: "Print the state of a thread (its head, or --at a checkpoint)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at < 0 {
				return usagef("--at %d: want a checkpoint seq ≥ 1", at)
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := checkNamespace(cmd.Context(), s, args[0], ns); err != nil {
				return err
			}
			cp, err := s.Load(cmd.Context(), store.LoadRequest{Thread: args[0], Namespace: ns, Seq: at})
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(toJSON(cp))
			}
			rw := jsontext.NewWriter(a.stdout)
			ind := newIndenter(rw)
			if _, err := cp.State.WriteJSON(ind); err != nil {
				return err
			}
			return errors.Join(ind.Close(), rw.Flush())
		},
	}
	cmd.Flags().Int64Var(&at, "at", 0, "checkpoint seq (default: the head)")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (a gate, a handoff, a subgraph: see cairn namespaces); default the root")
	return cmd
}

func (a *app) historyCmd() *cobra.Command {
	var limit int
	var before int64
	var ns string
	var states, tree bool
	cmd := &cobra.Command{
		Use:   "history THREAD",
		Short: "List a thread's checkpoints, newest first, with branches marked",
		Long: "Lists the checkpoints of one namespace of a thread (the root by default; --ns for a gate, a handoff or a subgraph; " +
			"cairn namespaces THREAD lists them). --states adds each checkpoint's full state: a STATE column in the table, a state field with --json.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || before < 0 {
				return usagef("--limit and --before must not be negative")
			}
			if tree && states && !a.json {
				return usagef("--states does not combine with --tree: drop --tree for a table with a STATE column, or add --json")
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Thread(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			if err := checkNamespace(cmd.Context(), s, args[0], ns); err != nil {
				return err
			}
			req := store.HistoryRequest{Thread: args[0], Namespace: ns, Limit: limit, Before: before, WithState: states}
			var cps []store.Checkpoint
			for cp, err := range s.History(cmd.Context(), req) {
				if err != nil {
					return argError(err)
				}
				cps = append(cps, cp)
			}
			cut, err := prunedBefore(cmd.Context(), s, cps)
			if err != nil {
				return argError(err)
			}
			if a.json {
				out := make([]checkpointJSON, 0, len(cps))
				for _, cp := range cps {
					j := toJSON(cp)
					j.PrunedBefore = cut[cp.Seq]
					out = append(out, j)
				}
				return a.printJSON(out)
			}
			if tree {
				for _, line := range renderTree(cps, cut) {
					fmt.Fprintln(a.stdout, line)
				}
			} else if err := a.historyTable(cps, states, cut); err != nil {
				return err
			}
			return a.namespaceHint(cmd.Context(), s, args[0], ns)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many checkpoints")
	cmd.Flags().Int64Var(&before, "before", 0, "start below this seq")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (a gate, a handoff, a subgraph: see cairn namespaces); default the root")
	cmd.Flags().BoolVar(&states, "states", false, "include every checkpoint's full state (a STATE column, or a state field with --json)")
	cmd.Flags().BoolVar(&tree, "tree", false, "draw the history as a tree, oldest first, branches indented")
	return cmd
}

// historyTable prints checkpoints as a table, with their states as compact
// JSON in a last column when asked.
func (a *app) historyTable(cps []store.Checkpoint, states bool, cut map[int64]bool) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	head := "SEQ\tPARENT\tSTATUS\tNODES\tCREATED\tCHANGE"
	if states {
		head += "\tSTATE"
	}
	fmt.Fprintln(tw, head)
	for _, cp := range cps {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s", cp.Seq, cp.Parent, cp.Status, orDash(strings.Join(cp.Nodes, ",")),
			cp.CreatedAt.Local().Format("2006-01-02 15:04:05.000"), describeIn(cp, cut))
		if states {
			fmt.Fprintf(tw, "\t%s", jsontext.Readable(cp.State.AppendJSON(nil)))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// namespaceHint tells, on stderr, which other namespaces the thread has.
func (a *app) namespaceHint(ctx context.Context, s store.Store, thread, shown string) error {
	list, err := s.Namespaces(ctx, thread)
	if err != nil {
		return argError(err)
	}
	var others []string
	for _, n := range list {
		if n.Name != shown {
			others = append(others, fmt.Sprintf("%s (%d)", orRoot(n.Name), n.Checkpoints))
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(a.stderr, "other namespaces (checkpoints): %s; see one with cairn history %s --ns NAME, all with cairn namespaces %s\n",
			strings.Join(others, ", "), thread, thread)
	}
	return nil
}

// checkNamespace fails with store.ErrNotFound, naming the thread's
// namespaces, when ns is not one of them.
func checkNamespace(ctx context.Context, s store.Store, thread, ns string) error {
	if ns == "" {
		return nil
	}
	list, err := s.Namespaces(ctx, thread)
	if err != nil {
		return argError(err)
	}
	names := make([]string, 0, len(list))
	for _, n := range list {
		if n.Name == ns {
			return nil
		}
		names = append(names, orRoot(n.Name))
	}
	return fmt.Errorf("%w: thread %q has no namespace %q; its namespaces: %s", store.ErrNotFound, thread, ns, strings.Join(names, ", "))
}

// orRoot names the root namespace.
func orRoot(ns string) string {
	if ns == "" {
		return `"" (root)`
	}
	return ns
}

func (a *app) namespacesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "namespaces THREAD",
		Short: "List a thread's namespaces: the root, and each gate, handoff or subgraph with its own checkpoints",
		Long:  "Every namespace listed can be read with cairn state THREAD --ns NAME and cairn history THREAD --ns NAME.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Namespaces(cmd.Context(), args[0])
			if err != nil {
				return argError(err)
			}
			if a.json {
				type nsJSON struct {
					Name        string    `json:"ns"`
					Head        int64     `json:"head"`
					Checkpoints int64     `json:"checkpoints"`
					UpdatedAt   time.Time `json:"updated_at"`
				}
				out := make([]nsJSON, 0, len(list))
				for _, n := range list {
					out = append(out, nsJSON{n.Name, n.Head, n.Checkpoints, n.UpdatedAt.UTC()})
				}
				return a.printJSON(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tHEAD\tCHECKPOINTS\tUPDATED")
			for _, n := range list {
				name := n.Name
				if name == "" {
					name = "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", name, n.Head, n.Checkpoints, n.UpdatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
}

// renderTree draws checkpoints as a tree, oldest first: a line of history
// stays at one depth; where a checkpoint has several children, each branch
// is drawn one level deeper.
func renderTree(cps []store.Checkpoint, cut map[int64]bool) []string {
	bySeq := map[int64]store.Checkpoint{}
	children := map[int64][]int64{}
	var roots []int64
	for _, cp := range cps {
		bySeq[cp.Seq] = cp
	}
	for _, cp := range cps {
		if _, ok := bySeq[cp.Parent]; ok {
			children[cp.Parent] = append(children[cp.Parent], cp.Seq)
		} else {
			roots = append(roots, cp.Seq)
		}
	}
	for k := range children {
		slices.Sort(children[k])
	}
	slices.Sort(roots)
	var lines []string
	label := func(cp store.Checkpoint) string {
		return fmt.Sprintf("%d %s %s  %s", cp.Seq, cp.Status, orDash(strings.Join(cp.Nodes, ",")), describeIn(cp, cut))
	}
	var walk func(seq int64, prefix string)
	walk = func(seq int64, prefix string) {
		for {
			cp := bySeq[seq]
			lines = append(lines, prefix+label(cp))
			kids := children[seq]
			if len(kids) == 0 {
				return
			}
			if len(kids) == 1 {
				seq = kids[0]
				continue
			}
			for i, k := range kids {
				branch, rest := "├─ ", "│  "
				if i == len(kids)-1 {
					branch, rest = "└─ ", "   "
				}
				saved := lines
				lines = nil
				walk(k, "")
				sub := lines
				lines = saved
				for j, l := range sub {
					if j == 0 {
						lines = append(lines, prefix+branch+l)
					} else {
						lines = append(lines, prefix+rest+l)
					}
				}
			}
			return
		}
	}
	for _, r := range roots {
		walk(r, "")
	}
	return lines
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// describe summarises a checkpoint's change in one line.
func describe(cp store.Checkpoint) string {
	var parts []string
	if cp.Meta.ForkedFrom != nil {
		from := cp.Meta.ForkedFrom
		if from.Thread == cp.Thread {
			parts = append(parts, fmt.Sprintf("fork of %d", from.Seq))
		} else {
			parts = append(parts, fmt.Sprintf("fork of %s@%d", from.Thread, from.Seq))
		}
	} else if cp.Parent != 0 && cp.Parent != cp.Seq-1 {
		parts = append(parts, fmt.Sprintf("branch from %d", cp.Parent))
	}
	if cp.Meta.Source == flow.SourceStop {
		parts = append(parts, "stopped: "+cp.Meta.StopReason)
	}
	if cp.Meta.Error != "" {
		parts = append(parts, "error: "+cp.Meta.Error)
	}
	ops := make([]string, 0, len(cp.Patch))
	for i, op := range cp.Patch {
		if i == 4 {
			ops = append(ops, fmt.Sprintf("… %d more", len(cp.Patch)-i))
			break
		}
		ops = append(ops, op.Op+" "+op.Path)
	}
	if len(ops) > 0 {
		parts = append(parts, strings.Join(ops, ", "))
	}
	return orDash(strings.Join(parts, "; "))
}

func (a *app) forkCmd() *cobra.Command {
	var at int64
	var into, ns string
	var sets []string
	cmd := &cobra.Command{
		Use:   "fork THREAD --at SEQ [--into NEW] [--set FIELD=JSON]...",
		Short: "Branch from a checkpoint: a new head of the thread, or a new thread with --into",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case !cmd.Flags().Changed("at"):
				return usagef("--at is required: the checkpoint seq to fork from")
			case at <= 0:
				return usagef("--at %d: a checkpoint seq is 1 or more", at)
			}
			var patch state.Patch
			for _, kv := range sets {
				field, raw, ok := strings.Cut(kv, "=")
				if !ok || field == "" {
					return usagef("--set %q: want FIELD=JSON", kv)
				}
				if !json.Valid([]byte(raw)) {
					return usagef("--set %s: %q is not JSON (quote strings: --set %s='\"text\"')", field, raw, field)
				}
				patch = append(patch, state.Op{Op: state.OpAdd, Path: state.FieldPointer(field), Value: json.RawMessage(raw)})
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			cp, err := s.Fork(cmd.Context(), store.ForkRequest{Thread: args[0], Namespace: ns, At: at, Into: into, Patch: patch})
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(toJSON(cp))
			}
			fmt.Fprintf(a.stdout, "forked %s@%d into %s@%d\n", args[0], at, cp.Thread, cp.Seq)
			return nil
		},
	}
	cmd.Flags().Int64Var(&at, "at", 0, "checkpoint seq to fork from (required)")
	cmd.Flags().StringVar(&into, "into", "", "new thread id (default: a branch in the same thread)")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (subgraph); default the root")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "set a top-level field of the forked state (FIELD=JSON, repeatable)")
	return cmd
}

func (a *app) exportCmd() *cobra.Command {
	var format, dir string
	cmd := &cobra.Command{
		Use:   "export THREAD --format trace|session-log|gate-files --dir DIR",
		Short: "Write a thread as files: trace (manifest.json, events.jsonl, steps.jsonl), session-log, or gate-files (.state layout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "trace" && format != "session-log" && format != "gate-files" {
				return usagef("--format %q: supported formats: trace, session-log, gate-files", format)
			}
			if dir == "" {
				return usagef("--dir is required")
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Thread(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			switch format {
			case "session-log":
				path, err := tracefile.ExportSessionLog(cmd.Context(), s, args[0], dir, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "wrote %s\n", path)
				return nil
			case "gate-files":
				paths, err := pipeline.ExportGateFiles(cmd.Context(), s, args[0], dir)
				if err != nil {
					return err
				}
				for _, p := range paths {
					fmt.Fprintf(a.stdout, "wrote %s\n", p)
				}
				return nil
			}
			m, err := tracefile.Export(cmd.Context(), s, args[0], dir)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(m)
			}
			fmt.Fprintf(a.stdout, "wrote %s/manifest.json, events.jsonl, steps.jsonl: %d checkpoints, status %s, stop reason %s\n", dir, m.Summary.Steps, m.Status, m.Summary.StopReason)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "trace", "trace, session-log or gate-files")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write into (required)")
	return cmd
}

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
