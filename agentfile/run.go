package agentfile

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// RunConfig says where and how an agent file runs.
type RunConfig struct {
	Store  store.Store
	Thread string
	// Namespace runs the file in a namespace of the thread ("" is the
	// root; a pipeline runs each gate's file in gateN). A run in a
	// namespace creates no thread (NewThread applies to the root only).
	Namespace  string
	Input      Input
	Model      agent.Model // overrides the file's model
	Durability flow.Durability
	Observer   func(flow.Event)
	// Logger receives what the run does (flow.Options.Logger) and the
	// model's retries. Nil: no logging.
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive the run's spans and
	// metrics (flow.Options).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// CaptureContent puts (redacted) message content on model-call spans.
	CaptureContent bool
	// Stream, when set, runs through flow's Runner.Stream in these modes
	// (flow.StreamMessages: the models' tokens as they arrive), so the
	// Observer receives their events too.
	Stream []flow.StreamMode
	Getenv func(string) string
	// Models resolves the file's model.provider (nil: model.Defaults(),
	// the providers this program imports). A Go program registers its own
	// providers on a copy of the defaults.
	Models *model.Registry
	// Tools are a Go program's own tools: an agent file's tools: may name
	// them (by Tool.Name) beside the built-ins (read_file, write_file,
	// list_files), which they cannot replace.
	Tools []agent.Tool
	// Answer answers an interrupt when resuming.
	Answer any
	// RunID names the run in its checkpoints and events (flow.RunOptions);
	// empty: a random id.
	RunID string
	// Abandon lets a new run start on a thread whose last run did not
	// finish (it is left in history as it stopped); without it Run
	// refuses with ErrUnfinished. For a caller told to replace the run in
	// progress (an HTTP client's multitask strategy interrupt).
	Abandon bool
	// InterruptBefore and InterruptAfter pause this run before or after
	// these steps, besides the file's own interrupt_before (steps that an
	// agent of the handoff chain does not have are ignored for it).
	InterruptBefore, InterruptAfter []string
	// AllowedRoot is the directory the user allows the run to reach: an
	// agent file's safe_dir (default: the agent file's folder) must be
	// inside it. Empty means the agent file's folder. Handoffs inherit it;
	// a pipeline passes its own.
	AllowedRoot string
	// Redact hides secrets before anything is stored or shown. Nil: the
	// agent file's secrets: (the defaults plus its keys and patterns, and
	// those of its handoff files), plus the values of the API key variables.
	// A pipeline passes its own.
	Redact *redact.Redactor
	// Items is the long-term memory store the memory tools (and the
	// run's nodes, flow.Items) use, scoped to the tenant of the thread.
	// Nil: the items of Store (full-text search).
	Items store.ItemStore
	// NewThread, when set, is the metadata of the thread Run creates
	// (if it does not exist) once every check passed, so a refused run
	// leaves nothing behind.
	NewThread map[string]any
	// Conversations, for a chat (kind: chat), keeps its threads'
	// conversations decoded from run to run (nil: each run decodes its
	// thread's whole conversation).
	Conversations *ConversationCache
	// Inbox, for a chat, is the thread inbox the run takes steering from
	// before each model call (flow.Options.Inbox); nil: the store's own
	// (store.InboxOf). Chains take none.
	Inbox flow.Inbox
}

// models is the registry the run resolves providers with.
func (cfg RunConfig) models() *model.Registry {
	if cfg.Models != nil {
		return cfg.Models
	}
	return model.Defaults()
}

// Result is how an agent file's run ended.
type Result struct {
	Agent       string
	Thread      string
	Namespace   string
	Result      flow.Result
	FinalOutput json.RawMessage // a JSON string for text outputs, the object for structured ones
	Structured  bool
	OutputFile  string
	Next        *Result // the handoff's run
}

var nonID = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// ThreadID turns a name into a valid thread id.
func ThreadID(name string) string {
	id := strings.Trim(nonID.ReplaceAllString(name, "-"), "-._:")
	if id == "" {
		return "agent"
	}
	if len(id) > 100 {
		id = id[:100]
	}
	return id
}

// NewThreadID names a new run's thread: the agent's (or pipeline's) name
// made a valid id, the UTC time to the millisecond and four random hex
// digits, so the threads of one file sort by start time and two runs
// started in the same millisecond still differ.
func NewThreadID(name string, now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s-%s-%x", ThreadID(name), now.UTC().Format("20060102T150405.000"), b)
}

// Run starts a new run of an agent file on a thread, writes its output
// file and follows its handoff. Every check (paths inside the safe
// directory, the model and its key, schemas, tools, handoff files) passes
// before anything is stored. On a thread that already has runs, the new run
// starts a fresh chain state ({agent_id, steps: {}, final_output: null},
// the new input); the earlier runs stay in the thread's history.
func Run(ctx context.Context, a *File, cfg RunConfig) (*Result, error) {
	return runAgent(ctx, a, cfg, cfg.Namespace, false)
}

// Resume continues an agent file's run on a thread (after a crash, a
// failed step, an interrupt or a fork), then writes its output and follows
// its handoff.
func Resume(ctx context.Context, a *File, cfg RunConfig) (*Result, error) {
	return runAgent(ctx, a, cfg, cfg.Namespace, true)
}

func runAgent(ctx context.Context, a *File, cfg RunConfig, ns string, resume bool) (*Result, error) {
	p, err := prepare(a, cfg)
	if err != nil {
		return nil, err
	}
	defer p.close()
	if a.IsChat() && ns != "" {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("a chat (kind: chat) keeps its thread's conversation: it runs at the thread's root, not in namespace %q", ns)}
	}
	if ns == "" && cfg.NewThread != nil {
		if err := createThread(ctx, cfg.Store, cfg.Thread, cfg.NewThread); err != nil {
			return nil, err
		}
	}
	return p.run(ctx, cfg, ns, resume)
}

// createThread creates the thread with its metadata unless it exists.
func createThread(ctx context.Context, s store.Store, thread string, meta map[string]any) error {
	_, err := s.Thread(ctx, thread)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err = s.CreateThread(ctx, store.Thread{ID: thread, Metadata: meta})
	if errors.Is(err, store.ErrConflict) {
		return nil // another process created it a moment ago; appends decide who runs
	}
	return err
}

// ErrUnfinished: a new run was asked for on a thread whose last run has
// not finished (it failed, was interrupted or crashed, or is a fork waiting
// to run, or another process is running it). Resume it instead.
var ErrUnfinished = errors.New("agentfile: the thread's last run has not finished")

// Unfinished reports whether a namespace's head checkpoint leaves work to
// do: a FAILED or INTERRUPTED step, or scheduled nodes.
func Unfinished(head store.Checkpoint) bool {
	return head.Status == store.StatusFailed || head.Status == store.StatusInterrupted || len(head.Meta.Next) > 0 || len(head.Meta.Tasks) > 0
}

// freshInput is a new run's input: on a namespace that already has state,
// the previous run's steps are removed and its final output cleared. A new
// run never abandons an unfinished one at the root (ErrUnfinished).
// It also returns the head it looked at, which the run must start from.
func freshInput(ctx context.Context, s store.Store, thread, ns, agentID string, in Input, abandon bool) (state.Update, int64, error) {
	if in.Kind == "" {
		in = TextInput("inline", "")
	}
	upd := state.Update{"agent_id": agentID, "input": in}
	head, err := startHead(ctx, s, thread, ns, abandon)
	if err != nil {
		return nil, 0, err
	}
	if head.Seq == 0 {
		return upd, 0, nil
	}
	var old map[string]json.RawMessage
	if head.State.Has("steps") {
		if err := head.State.Get("steps", &old); err != nil {
			return nil, 0, err
		}
	}
	clear := make(map[string]any, len(old))
	for k := range old {
		clear[k] = nil
	}
	upd["steps"] = clear
	upd["final_output"] = nil
	return upd, head.Seq, nil
}

// startHead is the head a new run on a namespace starts from (zero Seq:
// none); at the root, CheckStart decides whether it may.
func startHead(ctx context.Context, s store.Store, thread, ns string, abandon bool) (store.Checkpoint, error) {
	if ns == "" {
		st, err := CheckStart(ctx, s, StartRequest{Thread: thread, Abandon: abandon})
		return st.Head, err
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns})
	if errors.Is(err, store.ErrNotFound) {
		return store.Checkpoint{}, nil
	}
	return head, err
}

// agentSpan opens the run's invoke_agent span (GenAI conventions): the
// agent file's name, the thread as the conversation.
func (p *prepared) agentSpan(ctx context.Context, cfg RunConfig, ns string) (context.Context, trace.Span) {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", p.a.Name),
		attribute.String("gen_ai.conversation.id", cfg.Thread)}
	if ns != "" {
		attrs = append(attrs, attribute.String("cairn.namespace", ns))
	}
	return tp.Tracer("github.com/cairn-dev/cairn/agentfile").Start(ctx, "invoke_agent "+p.a.Name, trace.WithAttributes(attrs...))
}

// invoke runs plainly, or through a stream whose events the runner's
// Observer already receives, returning the stream's result.
func invoke(streaming bool, plain func() (flow.Result, error), stream func() iter.Seq2[flow.Event, error]) (flow.Result, error) {
	if !streaming {
		return plain()
	}
	for ev, err := range stream() {
		if ev.Result != nil || err != nil {
			if ev.Result == nil {
				return flow.Result{}, err
			}
			return *ev.Result, err
		}
	}
	return flow.Result{}, fmt.Errorf("agentfile: the run's stream ended without a result")
}

// run runs (or resumes) the prepared agent in namespace ns of the thread,
// writes its output file and follows its handoff.
func (p *prepared) run(ctx context.Context, cfg RunConfig, ns string, resume bool) (_ *Result, err error) {
	a := p.a
	ctx, span := p.agentSpan(ctx, cfg, ns)
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, p.redact.Error(err).Error())
		}
		span.End()
	}()
	r, err := p.runner(cfg, ns)
	if err != nil {
		return nil, err
	}
	var res flow.Result
	so := flow.StreamOptions{Modes: cfg.Stream, Subgraphs: true, Run: flow.RunOptions{RunID: cfg.RunID}}
	if resume {
		res, err = invoke(len(cfg.Stream) > 0, func() (flow.Result, error) { return r.Resume(ctx, cfg.Thread, cfg.Answer, so.Run) },
			func() iter.Seq2[flow.Event, error] { return r.StreamResume(ctx, cfg.Thread, cfg.Answer, so) })
	} else {
		in, seen, ferr := p.newInput(ctx, cfg, ns)
		if ferr != nil {
			return nil, ferr
		}
		so.Run.ExpectHead = seen
		res, err = invoke(len(cfg.Stream) > 0, func() (flow.Result, error) { return r.Invoke(ctx, cfg.Thread, in, so.Run) },
			func() iter.Seq2[flow.Event, error] { return r.Stream(ctx, cfg.Thread, in, so) })
	}
	out := &Result{Agent: a.Name, Thread: cfg.Thread, Namespace: ns, Result: res}
	if err != nil {
		return out, err
	}
	if res.StopReason != state.StopSuccess {
		return out, nil
	}
	out.FinalOutput = p.finalOutput(res.State)
	if len(out.FinalOutput) == 0 {
		return out, fmt.Errorf("%w: thread %q namespace %q finished without a final_output", ErrNoOutput, cfg.Thread, ns)
	}
	if len(a.Chain) > 0 && a.Chain[len(a.Chain)-1].Kind == "structured" {
		out.Structured = true
	}
	if a.Output.File != "" {
		if err := p.writeOutput(out); err != nil {
			return out, &FileError{File: a.Path, Msg: "output.file: " + err.Error(), Err: err}
		}
	}
	if p.next != nil {
		out.Next, err = p.handoff(ctx, cfg, ns, resume, out)
	}
	return out, err
}

// runner is the flow runner of the prepared agent in namespace ns.
func (p *prepared) runner(cfg RunConfig, ns string) (*flow.Runner, error) {
	return flow.NewRunner(p.graph, cfg.Store, flow.Options{Durability: cfg.Durability, Observer: cfg.Observer, Namespace: ns, Redact: p.redact, Logger: cfg.Logger, TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider, CaptureContent: cfg.CaptureContent,
		InterruptBefore: p.steps(p.a.InterruptBefore, cfg.InterruptBefore), InterruptAfter: p.steps(nil, cfg.InterruptAfter),
		RecursionLimit: p.recursionLimit(), Items: cfg.Items, ResponseSchemas: p.pauseSchemas, Inbox: p.inbox(cfg, ns), SteerBefore: []string{ChatAgentNode}})
}

// inbox is the inbox a run in namespace ns takes steering from: a chat's
// (whose conversation is its state's messages), at the thread's root.
func (p *prepared) inbox(cfg RunConfig, ns string) flow.Inbox {
	if !p.a.IsChat() || ns != "" {
		return nil
	}
	if cfg.Inbox == nil {
		if ib, err := store.InboxOf(cfg.Store); err == nil {
			return ib
		}
	}
	return cfg.Inbox
}

// steps keeps the file's own steps and those of the run's that this
// agent's graph has.
func (p *prepared) steps(own, run []string) []string {
	out := slices.Clone(own)
	nodes := p.graph.Nodes()
	for _, id := range run {
		if slices.Contains(nodes, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// UpdateState writes values into the state of an agent file's thread as if
// step asNode had written them, at the head (at 0) or, as a new branch, at
// checkpoint at (flow.Runner.UpdateStateAt), in cfg.Namespace. Nothing
// runs; a Resume afterwards runs what follows asNode.
func UpdateState(ctx context.Context, a *File, cfg RunConfig, at int64, values state.Update, asNode string) (store.Checkpoint, error) {
	p, err := prepare(a, cfg)
	if err != nil {
		return store.Checkpoint{}, err
	}
	defer p.close()
	r, err := p.runner(cfg, cfg.Namespace)
	if err != nil {
		return store.Checkpoint{}, err
	}
	if values, err = p.stateValues(values); err != nil {
		return store.Checkpoint{}, err
	}
	return r.UpdateStateAt(ctx, cfg.Thread, at, values, asNode)
}

// Graph returns the agent file's compiled chain (its steps, in order), as
// it runs with cfg, for a program that shows it.
func Graph(a *File, cfg RunConfig) (*flow.Compiled, error) {
	p, err := prepare(a, cfg)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p.graph, nil
}
