package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// An Assistant is what the service's runs run: a Go graph (Graph), an agent
// file or a pipeline file (LoadAssistants).
type Assistant interface {
	// Info describes the assistant.
	Info() AssistantInfo
	// Run starts a new run on spec.Thread from spec.Input, or resumes the
	// thread from its head (spec.Resume), and returns how it ended. It
	// calls spec.Observer with every event of the run.
	Run(ctx context.Context, spec RunSpec) (flow.Result, error)
	// UpdateState writes values into the thread's state as if node asNode
	// had written them: at the head (at 0), or as a new branch from
	// checkpoint at. Nothing runs.
	UpdateState(ctx context.Context, s store.Store, thread string, at int64, values state.Update, asNode string) (store.Checkpoint, error)
}

// AssistantInfo describes an assistant.
type AssistantInfo struct {
	// ID is the assistant id and graph id clients name.
	ID          string
	Name        string
	Description string
	// Kind is "graph", "agent", "chat" (an agent file of kind chat) or
	// "pipeline".
	Kind     string
	Metadata map[string]any
	// File is the agent or pipeline file, absolute; threads it runs on
	// record it, so that the CLI can resume them.
	File      string
	CreatedAt time.Time
	// Nodes and Edges draw the graph.
	Nodes []string
	Edges []flow.Edge
	// StateFields are the state's fields (for the schemas endpoint).
	StateFields []string
	// ApprovalTimeout, when set, bounds the wait at a pause: the service
	// answers a pause nobody answered in time with ApprovalFallback
	// ("reject" or "approve").
	ApprovalTimeout  time.Duration
	ApprovalFallback string
	// RedactsState: the assistant's runs redact what they commit (agent
	// files and pipelines always do; a Graph with Options.Redact), so the
	// events a run streams of its state show it as the store holds it;
	// for other assistants the service redacts those events too.
	RedactsState bool
}

// RunSpec is one run of an assistant.
type RunSpec struct {
	Store  store.Store
	Thread string
	// RunID names the run in its checkpoints and events.
	RunID string
	// Input starts a new run (JSON); with Resume the thread continues from
	// its head instead, and Answer (if not nil) answers its interrupt.
	Input  json.RawMessage
	Resume bool
	Answer any
	// Stream says which events the run must produce (values, messages…):
	// the Observer sees every event, whatever the modes.
	Stream   flow.StreamOptions
	Observer func(flow.Event)
	// InterruptBefore and InterruptAfter pause this run before or after
	// these nodes.
	InterruptBefore, InterruptAfter []string
	// Durability of the run's commits ("" is the assistant's default).
	Durability flow.Durability
	// RecursionLimit overrides the graph's step limit when not 0.
	RecursionLimit int
	// Abandon: a new run replaces a thread's unfinished one (multitask
	// strategy interrupt or rollback), which an agent file otherwise
	// refuses.
	Abandon bool
	// Inbox is the thread inbox the run takes steering from, where the
	// assistant takes any (Steerable).
	Inbox flow.Inbox
}

// Graph is a Go graph served as an assistant.
type Graph struct {
	ID          string
	Description string
	Graph       *flow.Compiled
	// Factory, when set, builds the graph each run runs from the run's
	// config and context (LangGraph's graph factory: nodes, tools or a
	// model chosen by config.configurable). Graph is then what the
	// assistant is drawn as; when nil, the factory's graph for an empty
	// config.
	Factory func(ctx context.Context, rc flow.RunConfig) (*flow.Compiled, error)
	// Options are the runner's options; each run adds its observer, its
	// interrupts and its durability.
	Options  flow.Options
	Metadata map[string]any
	// Types describe the graph's schemas (GET /assistants/{id}/schemas)
	// beyond what its reducers say.
	Types GraphTypes

	drawOnce sync.Once
	drawn    *flow.Compiled
	// inputKeys are Types.Input's fields (nil: every key is input).
	inputOnce sync.Once
	inputKeys map[string]bool
}

// Info implements Assistant.
func (g *Graph) Info() AssistantInfo {
	info := AssistantInfo{ID: g.ID, Name: g.ID, Description: g.Description, Kind: "graph", Metadata: g.Metadata, RedactsState: g.Options.Redact != nil}
	if c := g.drawing(); c != nil {
		info.Nodes, info.Edges, info.StateFields = c.Nodes(), c.Edges(), c.Schema().Fields()
	}
	return info
}

// drawing is the graph the assistant is drawn as: Graph, or the factory's
// for an empty config (nil when it fails).
func (g *Graph) drawing() *flow.Compiled {
	if g.Graph != nil || g.Factory == nil {
		return g.Graph
	}
	g.drawOnce.Do(func() { g.drawn, _ = g.Factory(context.Background(), flow.RunConfig{}) })
	return g.drawn
}

// compiled is the graph a run runs: the factory's for the run's config,
// else Graph.
func (g *Graph) compiled(ctx context.Context) (*flow.Compiled, error) {
	if g.Factory == nil {
		return g.Graph, nil
	}
	c, err := g.Factory(ctx, flow.RunConfigOf(ctx))
	if err == nil && c == nil {
		err = fmt.Errorf("%w: assistant %q: the graph factory built no graph", flow.ErrInvalidGraph, g.ID)
	}
	return c, err
}

func (g *Graph) runner(ctx context.Context, s store.Store, spec RunSpec) (*flow.Runner, error) {
	c, err := g.compiled(ctx)
	if err != nil {
		return nil, err
	}
	opts := g.Options
	opts.Observer = spec.Observer
	opts.InterruptBefore = append(slices.Clone(opts.InterruptBefore), nodesOf(c, spec.InterruptBefore)...)
	opts.InterruptAfter = append(slices.Clone(opts.InterruptAfter), nodesOf(c, spec.InterruptAfter)...)
	if spec.Durability != "" {
		opts.Durability = spec.Durability
	}
	if opts.Inbox == nil && spec.Inbox != nil {
		if _, err := flow.SteerField(c.Schema(), opts.SteerField); err == nil {
			opts.Inbox = spec.Inbox
		}
	}
	return flow.NewRunner(c, s, opts)
}

// nodesOf keeps the names that are nodes of c: a run's interrupts may
// name nodes the graph built for its config lacks, which pause nothing.
func nodesOf(c *flow.Compiled, names []string) []string { return known(c.Nodes(), names) }

// Run implements Assistant: a new run's input is a JSON object, the state
// update that starts it.
func (g *Graph) Run(ctx context.Context, spec RunSpec) (flow.Result, error) {
	r, err := g.runner(ctx, spec.Store, spec)
	if err != nil {
		return flow.Result{}, err
	}
	so := spec.Stream
	so.Run = flow.RunOptions{RunID: spec.RunID, RecursionLimit: spec.RecursionLimit}
	if spec.Resume {
		return streamResult(r.StreamResume(ctx, spec.Thread, spec.Answer, so))
	}
	var upd state.Update
	if len(spec.Input) > 0 && string(spec.Input) != "null" {
		if err := json.Unmarshal(spec.Input, &upd); err != nil {
			return flow.Result{}, invalid("$.input", "a graph's input is an object of state fields: %v", err)
		}
	}
	g.inputOnce.Do(func() { g.inputKeys = inputFields(g.Types.Input) })
	if keep := g.inputKeys; keep != nil {
		maps.DeleteFunc(upd, func(k string, _ any) bool { return !keep[k] }) // as LangGraph reads input through its input schema
	}
	coerceMessages(r.Schema(), upd)
	return streamResult(r.Stream(ctx, spec.Thread, upd, so))
}

// streamResult drains a stream whose events the runner's observer has
// already seen, and returns its result.
func streamResult(events func(func(flow.Event, error) bool)) (flow.Result, error) {
	for ev, err := range events {
		if ev.Kind == flow.EventResult {
			if ev.Result == nil {
				return flow.Result{}, err
			}
			return *ev.Result, err
		}
	}
	return flow.Result{}, errors.New("runs: the run's stream ended without a result")
}

// UpdateState implements Assistant.
func (g *Graph) UpdateState(ctx context.Context, s store.Store, thread string, at int64, values state.Update, asNode string) (store.Checkpoint, error) {
	r, err := g.runner(ctx, s, RunSpec{})
	if err != nil {
		return store.Checkpoint{}, err
	}
	coerceMessages(r.Schema(), values)
	return r.UpdateStateAt(ctx, thread, at, values, asNode)
}

// AssistantConfig is what agent files and pipelines need to run.
type AssistantConfig struct {
	// Getenv reads API keys (nil: os.Getenv).
	Getenv func(string) string
	// AllowedRoot is the directory agent files may reach (their safe_dir
	// must be inside it); empty: each file's own folder.
	AllowedRoot string
	// Configure, when set, completes an agent file's run configuration
	// (models, tools, logger, tracing) before each run.
	Configure func(*agentfile.RunConfig)
	// ConfigurePipeline does the same for pipelines.
	ConfigurePipeline func(*pipeline.Config)
}

// LoadAssistants reads the agent files (*.md) and pipeline files (*.yaml,
// *.yml) in dir, each checked as a run would check it; the assistant id is
// the file's name. A file that does not load or check, or two files of one
// name, is an error naming the file: nothing is served from a folder with
// a broken file.
func LoadAssistants(dir string, cfg AssistantConfig) ([]Assistant, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("runs: assistants: %w", err)
	}
	var out []Assistant
	seen := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".md" && ext != ".yaml" && ext != ".yml") {
			continue
		}
		path, err := filepath.Abs(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		a, err := loadAssistant(path, ext, cfg)
		if err != nil {
			return nil, fmt.Errorf("runs: assistant %s: %w", path, err)
		}
		id := a.Info().ID
		if prev, ok := seen[id]; ok {
			return nil, fmt.Errorf("runs: assistants %s and %s are both named %q", prev, path, id)
		}
		seen[id] = path
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("runs: no agent (*.md) or pipeline (*.yaml) files in %s", dir)
	}
	return out, nil
}

// LoadAssistant reads one agent file (.md) or pipeline file (.yaml,
// .yml), checked as LoadAssistants checks the files of a folder.
func LoadAssistant(path string, cfg AssistantConfig) (Assistant, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ext := strings.ToLower(filepath.Ext(abs))
	if ext != ".md" && ext != ".yaml" && ext != ".yml" {
		return nil, fmt.Errorf("runs: assistant %s: want an agent file (.md) or a pipeline file (.yaml)", path)
	}
	return loadAssistant(abs, ext, cfg)
}

func loadAssistant(path, ext string, cfg AssistantConfig) (Assistant, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if ext == ".md" {
		f, err := agentfile.Load(path)
		if err != nil {
			return nil, err
		}
		a := &agentAssistant{f: f, cfg: cfg, created: info.ModTime(), conversations: conversationsOf(f)}
		g, err := agentfile.Graph(f, a.RunConfig(nil, RunSpec{}))
		if err != nil {
			return nil, err
		}
		a.nodes, a.edges = g.Nodes(), g.Edges()
		return a, nil
	}
	p, err := pipeline.Load(path)
	if err != nil {
		return nil, err
	}
	a := &pipelineAssistant{p: p, cfg: cfg, created: info.ModTime()}
	if err := p.Check(a.config(nil, RunSpec{})); err != nil {
		return nil, err
	}
	return a, nil
}

// agentAssistant serves an agent file.
type agentAssistant struct {
	f       *agentfile.File
	cfg     AssistantConfig
	created time.Time
	nodes   []string
	edges   []flow.Edge
	// conversations keeps a chat's conversations decoded between runs.
	conversations *agentfile.ConversationCache
}

func (a *agentAssistant) Info() AssistantInfo {
	timeout, fallback, _ := a.f.Approval.Deadline() // checked when the file loaded
	info := AssistantInfo{ID: a.f.Name, Name: a.f.Name, Description: a.f.Description, Kind: "agent", File: a.f.Path, CreatedAt: a.created,
		Nodes: a.nodes, Edges: a.edges, StateFields: []string{"agent_id", "input", "steps", "final_output"},
		Metadata:        map[string]any{"kind": "agent", "file": filepath.Base(a.f.Path)},
		ApprovalTimeout: timeout, ApprovalFallback: fallback, RedactsState: true}
	if a.f.IsChat() {
		chatInfo(&info, len(a.f.ApproveTools) > 0)
	}
	return info
}

func (a *agentAssistant) RunConfig(s store.Store, spec RunSpec) agentfile.RunConfig {
	rc := agentfile.RunConfig{Store: s, Thread: spec.Thread, Getenv: a.cfg.Getenv, AllowedRoot: a.cfg.AllowedRoot, RunID: spec.RunID,
		Observer: spec.Observer, Stream: spec.Stream.Modes, Answer: spec.Answer, Durability: spec.Durability,
		InterruptBefore: known(a.nodes, spec.InterruptBefore), InterruptAfter: known(a.nodes, spec.InterruptAfter), Abandon: spec.Abandon, Conversations: a.conversations, Inbox: spec.Inbox}
	if a.cfg.Configure != nil {
		a.cfg.Configure(&rc)
	}
	return rc
}

// Run implements Assistant: a new run's input is the agent's input, a
// JSON string as text, anything else as JSON; null or absent is empty text.
func (a *agentAssistant) Run(ctx context.Context, spec RunSpec) (flow.Result, error) {
	rc := a.RunConfig(spec.Store, spec)
	if len(rc.Stream) == 0 {
		rc.Stream = []flow.StreamMode{flow.StreamValues}
	}
	var res *agentfile.Result
	var err error
	if spec.Resume {
		res, err = agentfile.Resume(ctx, a.f, rc)
	} else {
		rc.Input = agentInput(spec.Input)
		res, err = agentfile.Run(ctx, a.f, rc)
	}
	if res == nil {
		return flow.Result{}, chatError("$.input", err)
	}
	last := res
	for last.Next != nil {
		last = last.Next
	}
	out := res.Result
	if last != res && last.Result.StopReason != state.StopSuccess {
		// A handoff stopped short: the thread's run did too.
		out.StopReason, out.Interrupt, out.Next = last.Result.StopReason, last.Result.Interrupt, last.Result.Next
	}
	return out, err
}

func agentInput(in json.RawMessage) agentfile.Input {
	var s string
	switch {
	case len(in) == 0 || string(in) == "null":
		return agentfile.TextInput("api", "")
	case json.Unmarshal(in, &s) == nil:
		return agentfile.TextInput("api", s)
	}
	return agentfile.Input{Source: "api", Kind: "json", Content: in}
}

func (a *agentAssistant) UpdateState(ctx context.Context, s store.Store, thread string, at int64, values state.Update, asNode string) (store.Checkpoint, error) {
	cp, err := agentfile.UpdateState(ctx, a.f, a.RunConfig(s, RunSpec{Thread: thread}), at, values, asNode)
	return cp, chatError("$.values", err)
}

// known keeps the names among nodes.
func known(nodes, names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !slices.Contains(nodes, n) })
}

// pipelineAssistant serves a pipeline file.
type pipelineAssistant struct {
	p       *pipeline.Pipeline
	cfg     AssistantConfig
	created time.Time
}

func (a *pipelineAssistant) Info() AssistantInfo {
	info := AssistantInfo{ID: a.p.Name, Name: a.p.Name, Description: a.p.Metadata.UserStory, Kind: "pipeline", File: a.p.Path, CreatedAt: a.created,
		Metadata: map[string]any{"kind": "pipeline", "file": filepath.Base(a.p.Path), "domain": a.p.Metadata.Domain, "feature": a.p.Metadata.Feature}, RedactsState: true}
	prev := flow.START
	for _, g := range a.p.Gates {
		n := fmt.Sprintf("gate%d", g.Gate)
		info.Nodes = append(info.Nodes, n)
		info.Edges = append(info.Edges, flow.Edge{From: prev, To: n})
		prev = n
	}
	info.Edges = append(info.Edges, flow.Edge{From: prev, To: flow.END})
	return info
}

func (a *pipelineAssistant) config(s store.Store, spec RunSpec) pipeline.Config {
	pc := pipeline.Config{Store: s, Thread: spec.Thread, Getenv: a.cfg.Getenv, Observer: spec.Observer, Stream: spec.Stream.Modes, Answer: spec.Answer}
	if a.cfg.ConfigurePipeline != nil {
		a.cfg.ConfigurePipeline(&pc)
	}
	return pc
}

// Run implements Assistant: a pipeline works on the request in its file,
// so its input must be empty; a new run and a resume both continue the
// thread's pipeline where it stopped.
func (a *pipelineAssistant) Run(ctx context.Context, spec RunSpec) (flow.Result, error) {
	if in := strings.TrimSpace(string(spec.Input)); in != "" && in != "null" && in != "{}" && !spec.Resume {
		return flow.Result{}, invalid("$.input", "a pipeline works on the request in its file; send no input")
	}
	if len(spec.InterruptBefore)+len(spec.InterruptAfter) > 0 {
		return flow.Result{}, invalid("$.interrupt_before", "pipelines take no interrupts")
	}
	pc := a.config(spec.Store, spec)
	if len(pc.Stream) == 0 {
		pc.Stream = []flow.StreamMode{flow.StreamValues}
	}
	res, err := pipeline.Run(ctx, a.p, pc)
	if res == nil {
		return flow.Result{}, err
	}
	return res.Result, err
}

func (a *pipelineAssistant) UpdateState(context.Context, store.Store, string, int64, state.Update, string) (store.Checkpoint, error) {
	return store.Checkpoint{}, invalid("$", "a pipeline's state is written by its gates; fork a checkpoint and resume instead")
}
