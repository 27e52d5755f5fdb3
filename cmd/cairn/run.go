package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/tracefile"
)

// exitInterrupted is the exit code of a run that stopped to wait for input.
const exitInterrupted = 3

// interruptedError makes run() exit with exitInterrupted.
type interruptedError struct {
	thread string
	// approval: a pipeline waits before gate approvalGate.
	approval     bool
	approvalGate int
}

func (e *interruptedError) Error() string {
	if e.approval {
		return fmt.Sprintf("thread %q is waiting for approval at gate %d: cairn resume %s --answer approve (or --answer reject to stop the pipeline there, "+
			`or --answer '{"action":"edit","value":{…}}' to change its state first)`, e.thread, e.approvalGate, e.thread)
	}
	return fmt.Sprintf("thread %q is waiting for input: cairn resume %s --answer VALUE", e.thread, e.thread)
}

// parseModelEnv opens the model --model names (PROVIDER:ARGS: scripted:FILE,
// openai-compatible:MODEL[@BASE_URL], anthropic:MODEL, or any provider the
// binary registered), with keys read by getenv (nil: os.Getenv).
func parseModelEnv(s string, getenv func(string) string) (agent.Model, error) {
	models := model.Defaults()
	cfg, err := models.ParseSpec(s)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--model: %w", err)}
	}
	cfg.Getenv = getenv
	m, err := models.Open(context.Background(), cfg)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--model %s: %w", s, err)}
	}
	return m, nil
}

// storableModel returns the --model spec as kept in a thread's metadata, so
// that cairn resume runs the same model: a script path made absolute; a
// base URL with credentials in it is refused (keys belong in environment
// variables, never in the store).
func storableModel(s string) (string, error) {
	models := model.Defaults()
	cfg, err := models.ParseSpec(s)
	if err != nil {
		return "", &usageError{fmt.Errorf("--model: %w", err)}
	}
	if cfg.Script != "" {
		if cfg.Script, err = filepath.Abs(cfg.Script); err != nil {
			return "", &usageError{fmt.Errorf("--model: %w", err)}
		}
	}
	if cfg.BaseURL != "" {
		key := models.KeyEnv(cfg)
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || u.User != nil {
			return "", usagef("--model: the base URL must not hold credentials; put the key in %s", key)
		}
		for k := range u.Query() {
			if redact.Default().IsSecretKey(k) {
				return "", usagef("--model: the base URL's %q parameter is a secret; put the key in %s", k, key)
			}
		}
	}
	return models.FormatSpec(cfg)
}

// progress prints a line per step on stderr with the step's own duration
// (from its start to its commit), or every event as a JSON line on stdout
// with --json.
func (a *app) progress() func(flow.Event) {
	var mu sync.Mutex
	starts := map[string]time.Time{} // run id → start of its current step
	enc := jsontext.NewEncoder(a.stdout)
	live := "" // the model call whose tokens are being printed
	return func(e flow.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == flow.EventRunEnd {
			a.redacted.Add(int64(e.Redacted))
		}
		if a.json {
			_ = enc.Encode(e)
			return
		}
		if e.Kind == flow.EventMessage {
			live = a.printTokens(e, live)
			return
		}
		if live != "" && (e.Kind == flow.EventStepEnd || e.Kind == flow.EventError || e.Kind == flow.EventInterrupt) {
			fmt.Fprintln(a.stderr)
			live = ""
		}
		switch e.Kind {
		case flow.EventStepStart:
			starts[e.RunID] = e.Time
		case flow.EventStepEnd:
			tok := ""
			if e.Tokens.Input+e.Tokens.Output > 0 {
				tok = fmt.Sprintf(", tokens %d in / %d out", e.Tokens.Input, e.Tokens.Output)
			}
			took := e.Time.Sub(starts[e.RunID])
			where := fmt.Sprintf("checkpoint %-4d", e.Seq)
			if e.Seq == 0 {
				where = "kept for exit " // --durability exit: one checkpoint when the run stops
			}
			fmt.Fprintf(a.stderr, "  ✓ %-16s %s %6.1f ms%s\n", strings.Join(e.Nodes, ","), where, float64(took.Microseconds())/1000, tok)
		case flow.EventError:
			fmt.Fprintf(a.stderr, "  ✗ step failed: %s\n", e.Err)
		case flow.EventInterrupt:
			fmt.Fprintf(a.stderr, "  ? %s is waiting for input: %s\n", e.Node, e.Payload)
		}
	}
}

// printTokens prints a model's text as it arrives, on one line per model
// call that starts with the node's name; live is the call being printed.
func (a *app) printTokens(e flow.Event, live string) string {
	var c agent.MessageChunk
	if json.Unmarshal(e.Payload, &c) != nil || c.Text == "" {
		return live
	}
	if c.ID != live {
		if live != "" {
			fmt.Fprintln(a.stderr)
		}
		fmt.Fprintf(a.stderr, "  … %-16s ", e.Node)
	}
	fmt.Fprint(a.stderr, c.Text)
	return c.ID
}

// traced runs run with OpenTelemetry export when the environment asks
// for it, and with a live trace in --trace-dir when one is asked for (the
// run is then streamed in checkpoints mode so the trace follows each
// commit).
func (a *app) traced(ctx context.Context, s store.Store, cfg *agentfile.RunConfig, run func() (*agentfile.Result, error)) (*agentfile.Result, error) {
	tp, stop, err := a.tracing(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	cfg.TracerProvider = tp
	mp, stopMetrics, err := a.metering(ctx)
	if err != nil {
		return nil, err
	}
	defer stopMetrics()
	cfg.MeterProvider = mp
	cfg.CaptureContent = a.getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") == "true"
	if a.traceDir == "" {
		return run()
	}
	l, err := tracefile.NewLive(ctx, s, cfg.Thread, a.traceDir)
	if err != nil {
		return nil, fmt.Errorf("--trace-dir: %w", err)
	}
	progress := cfg.Observer
	observe := l.Observer(ctx)
	cfg.Observer = func(ev flow.Event) { progress(ev); observe(ev) }
	if !slices.Contains(cfg.Stream, flow.StreamCheckpoints) {
		cfg.Stream = append(cfg.Stream, flow.StreamCheckpoints)
	}
	res, err := run()
	if cerr := l.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = fmt.Errorf("--trace-dir: %w", cerr)
	}
	return res, err
}

// streamFlag adds --stream-mode (and --trace-dir) to run and resume.
func (a *app) streamFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.traceDir, "trace-dir", "", "write the run's trace (manifest.json, events.jsonl, steps.jsonl) in this folder as it proceeds; the same files cairn export --format trace writes afterwards (agent files)")
	cmd.Flags().StringVar(&a.streamMode, "stream-mode", "", "stream modes, comma-separated (messages, updates, values, custom, checkpoints, tasks, debug) or none; "+
		"default: messages (tokens as they arrive) on a terminal and with --json, none otherwise (one line per step)")
}

// streams is what run and resume stream: --stream-mode, or by default the
// models' tokens when they can be shown (a terminal, or --json).
func (a *app) streams() ([]flow.StreamMode, error) {
	switch a.streamMode {
	case "none":
		return nil, nil
	case "":
		if a.json || isTerminal(a.stderr) {
			return []flow.StreamMode{flow.StreamMessages}, nil
		}
		return nil, nil
	}
	modes, err := parseStreamModes(a.streamMode)
	if err != nil {
		return nil, usagef("--stream-mode: %v", errors.Unwrap(err))
	}
	return modes, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runFlags are cairn run's flags.
type runFlags struct {
	inputPath, inputText, thread, model, durability, safeDir string
	queue                                                    bool
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run an agent file (.md: Markdown with YAML front matter) or a gate pipeline (.yaml) as a new run, committing every step",
		Long: "Each run of an agent file is a new run on a new thread (the agent's name, the start time and a random suffix), " +
			"printed first. --thread T runs on thread T instead: created if missing; on an existing thread the new run starts " +
			"a fresh chain state and the thread keeps the earlier runs in its history. Everything is checked before anything " +
			"is stored: a bad file, a path outside the safe directory or a missing key exits 2 and leaves no thread.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.inputPath != "" && f.inputText != "" {
				return usagef("give --input or --input-text, not both")
			}
			if f.queue {
				return a.queueRunCLI(cmd.Context(), args[0], f)
			}
			if ext := strings.ToLower(filepath.Ext(args[0])); ext == ".yaml" || ext == ".yml" {
				for _, name := range []string{"input", "input-text", "safe-dir", "durability", "trace-dir"} {
					if cmd.Flags().Changed(name) {
						return usagef("--%s applies to agent files; a pipeline takes its input from its metadata and its gates' agent files", name)
					}
				}
				return a.runPipeline(cmd, pipelineCall{path: args[0], thread: f.thread, model: f.model})
			}
			return a.runAgentFile(cmd.Context(), args[0], f)
		},
	}
	cmd.Flags().StringVar(&f.inputPath, "input", "", "input file (.json is parsed as JSON, anything else is text)")
	cmd.Flags().StringVar(&f.inputText, "input-text", "", "input text")
	cmd.Flags().StringVar(&f.thread, "thread", "", "run on this thread (default: a new thread named after the agent, the time and a random suffix)")
	cmd.Flags().StringVar(&f.model, "model", "", "override the file's model: scripted:FILE, openai-compatible:MODEL[@BASE_URL], anthropic:MODEL (kept for cairn resume)")
	cmd.Flags().StringVar(&f.durability, "durability", "sync", "sync, async or exit (kept for cairn resume)")
	a.streamFlag(cmd)
	cmd.Flags().StringVar(&f.safeDir, "safe-dir", "", "the directory the agent files may reach; their safe_dir must be inside it (default: the agent file's folder)")
	cmd.Flags().BoolVar(&f.queue, "queue", false, "queue the run for cairn worker processes (PostgreSQL store) instead of running it here; prints the thread and the run")
	return cmd
}

// runAgentFile starts a new run of an agent file: every check first, then
// the store, the thread and the run.
func (a *app) runAgentFile(ctx context.Context, path string, f runFlags) error {
	af, cfg, o, err := a.agentRun(path, f)
	if err != nil {
		return err
	}
	thread, s, err := a.openForRun(af.Name, f.thread)
	if err != nil {
		return err
	}
	defer s.Close()
	if f.thread != "" {
		if err := checkRunThread(ctx, s, thread, o); err != nil {
			return err
		}
	}
	cfg.Store, cfg.Thread, cfg.NewThread = s, thread, o.metadata()
	a.announce("running", af.Name, thread)
	res, err := a.traced(ctx, s, &cfg, func() (*agentfile.Result, error) { return agentfile.Run(ctx, af, cfg) })
	return a.report(ctx, s, thread, res, err)
}

// openForRun names a new run's thread (the given one, or a new id from the
// file's name) and opens the store for it, once the file has passed its
// checks.
func (a *app) openForRun(name, thread string) (string, *store.Engine, error) {
	if thread == "" {
		thread = agentfile.NewThreadID(name, time.Now())
	}
	if err := store.ValidateThreadID(thread); err != nil {
		return "", nil, &usageError{fmt.Errorf("--thread: %w", err)}
	}
	s, err := a.open()
	return thread, s, err
}

// agentRun loads and checks an agent file with the flags, touching no
// store: what to run, how, and the options to keep for cairn resume.
func (a *app) agentRun(path string, f runFlags) (*agentfile.File, agentfile.RunConfig, runOptions, error) {
	var cfg agentfile.RunConfig
	d, err := flow.ParseDurability(f.durability)
	if err != nil {
		return nil, cfg, runOptions{}, &usageError{fmt.Errorf("--durability: %w", err)}
	}
	o := runOptions{Kind: "agent", Durability: string(d)}
	if o.File, err = filepath.Abs(path); err != nil {
		return nil, cfg, o, &usageError{err}
	}
	af, err := agentfile.Load(path)
	if err != nil {
		return nil, cfg, o, &usageError{err}
	}
	if af.IsChat() {
		o.Kind = agentfile.KindChat // as cairn serve records it: either may continue the other's thread
	}
	cfg = agentfile.RunConfig{Durability: d, Getenv: a.getenv, Observer: a.progress(), Input: agentfile.TextInput("inline", f.inputText), Logger: a.logger}
	if cfg.Stream, err = a.streams(); err != nil {
		return nil, cfg, o, err
	}
	if f.model != "" {
		if cfg.Model, err = parseModelEnv(f.model, a.getenv); err != nil {
			return nil, cfg, o, err
		}
		if o.Model, err = storableModel(f.model); err != nil {
			return nil, cfg, o, err
		}
	}
	if f.safeDir != "" {
		if o.SafeDir, err = filepath.Abs(f.safeDir); err != nil {
			return nil, cfg, o, &usageError{fmt.Errorf("--safe-dir: %w", err)}
		}
		cfg.AllowedRoot = o.SafeDir
	}
	if f.inputPath != "" {
		if cfg.Input, err = agentfile.ReadInput(f.inputPath); err != nil {
			return nil, cfg, o, &usageError{err}
		}
	}
	if err := agentfile.Check(af, cfg); err != nil {
		return nil, cfg, o, &usageError{err}
	}
	return af, cfg, o, nil
}

// announce prints the thread a run works on before it starts: a line on
// stderr, or a first JSON line with --json.
func (a *app) announce(verb, name, thread string) {
	if a.json {
		b, _ := jsontext.Marshal(map[string]string{"kind": "thread", "thread": thread, "agent": name, "store": a.shownStore()}) // strings always marshal
		fmt.Fprintln(a.stdout, string(b))
		return
	}
	fmt.Fprintf(a.stderr, "thread %s: %s %s (%s)\n", thread, verb, name, a.shownStore())
}

func (a *app) resumeCmd() *cobra.Command {
	var answer string
	cmd := &cobra.Command{
		Use:   "resume THREAD [--answer VALUE]",
		Short: "Continue a run after a crash, a failed step, an interrupt or a fork, with the model and options it was started with",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			th, err := s.Thread(cmd.Context(), args[0])
			if err != nil {
				return argError(err)
			}
			o := runOptionsOf(th)
			if o.File == "" {
				return fmt.Errorf("%w: thread %q was not started by cairn run; resume it from the program that runs it", errNotResumable, args[0])
			}
			if th.Head == 0 {
				return fmt.Errorf("%w: thread %q has no checkpoints: its run never started; start it with cairn run %s --thread %s",
					errNotResumable, args[0], o.File, args[0])
			}
			if o.Kind == agentfile.KindPipeline {
				if a.traceDir != "" {
					return usagef("--trace-dir applies to agent files; export a pipeline's trace with cairn export --format trace")
				}
				pc := pipelineCall{path: o.File, thread: args[0], model: o.Model, resume: true}
				if cmd.Flags().Changed("answer") {
					if pc.answer, err = approvalAnswer(answer); err != nil {
						return err
					}
				}
				return a.runPipeline(cmd, pc)
			}
			var value any
			if cmd.Flags().Changed("answer") {
				if json.Unmarshal([]byte(answer), &value) != nil {
					value = answer
				}
			}
			return a.resumeAgentFile(cmd.Context(), s, args[0], o, value)
		},
	}
	cmd.Flags().StringVar(&answer, "answer", "", "the answer to an interrupt (JSON, or plain text); at a pipeline's approval gate: approve, reject, or a JSON approval {action, value, reason, by}")
	a.streamFlag(cmd)
	return cmd
}

// resumeAgentFile continues an agent file's run on a thread with the
// options it was started with; value answers an interrupt.
func (a *app) resumeAgentFile(ctx context.Context, s store.Store, thread string, o runOptions, value any) error {
	af, err := agentfile.Load(o.File)
	if err != nil {
		return &usageError{err}
	}
	cfg := agentfile.RunConfig{Store: s, Thread: thread, Observer: a.progress(), Getenv: a.getenv, AllowedRoot: o.SafeDir, Answer: value, Logger: a.logger}
	if cfg.Stream, err = a.streams(); err != nil {
		return err
	}
	if o.Model != "" {
		if cfg.Model, err = parseModelEnv(o.Model, a.getenv); err != nil {
			return fmt.Errorf("thread %q was started with --model %s: %w", thread, o.Model, err)
		}
	}
	if cfg.Durability, err = flow.ParseDurability(o.Durability); err != nil {
		return fmt.Errorf("thread %q durability: %w", thread, err)
	}
	a.announce("resuming", af.Name, thread)
	res, err := a.traced(ctx, s, &cfg, func() (*agentfile.Result, error) { return agentfile.Resume(ctx, af, cfg) })
	return a.report(ctx, s, thread, res, err)
}

// tellRedactions says once, after a run, how many node updates had a
// secret redacted before they were stored (the per-update lines are at
// info level).
func (a *app) tellRedactions() {
	n := a.redacted.Swap(0)
	if n == 0 {
		return
	}
	updates := "updates"
	if n == 1 {
		updates = "update"
	}
	fmt.Fprintf(a.stderr, "secrets were redacted from %d node %s before they were stored or shown (--log-level info names the nodes)\n", n, updates)
}

// errNotResumable: cairn resume cannot continue the thread.
var errNotResumable = errors.New("thread cannot be resumed")

// report prints how a run ended. A failed run's advice names what works:
// cairn resume when the thread has a checkpoint to continue from.
func (a *app) report(ctx context.Context, s store.Store, thread string, res *agentfile.Result, err error) error {
	defer a.tellRedactions()
	if err != nil {
		if errors.Is(err, agentfile.ErrUnfinished) {
			return fmt.Errorf("%w; another process may be running it: continue it with cairn resume %s once it stops, or leave out --thread to start a new thread", err, thread)
		}
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w (another process wrote thread %q first; see cairn history %s)", err, thread, thread)
		}
		if th, terr := s.Thread(ctx, thread); terr == nil && th.Head > 0 {
			return fmt.Errorf("%w (thread %q: fix the cause and run cairn resume %s)", err, thread, thread)
		}
		if errors.Is(err, agentfile.ErrInvalidFile) {
			return &usageError{err}
		}
		return err
	}
	for r := res; r != nil; r = r.Next {
		if a.json {
			_ = a.printJSON(map[string]any{"agent": r.Agent, "thread": r.Thread, "namespace": r.Namespace, "stop_reason": r.Result.StopReason,
				"head": r.Result.Head, "final_output": r.FinalOutput, "output_file": r.OutputFile})
		} else {
			fmt.Fprintf(a.stdout, "%s: %s after %d steps", r.Agent, r.Result.StopReason, r.Result.Progress.Steps)
			if r.OutputFile != "" {
				fmt.Fprintf(a.stdout, ", wrote %s", r.OutputFile)
			}
			fmt.Fprintln(a.stdout)
			if r.Next == nil && len(r.FinalOutput) > 0 {
				var s string
				if json.Unmarshal(r.FinalOutput, &s) == nil {
					fmt.Fprintln(a.stdout, s)
				} else {
					fmt.Fprintln(a.stdout, string(jsontext.Readable(r.FinalOutput)))
				}
			}
		}
		if r.Result.StopReason == state.StopInterrupt {
			return &interruptedError{thread: r.Thread}
		}
	}
	return nil
}
