package agentfile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Input is what an agent works on.
type Input struct {
	Source  string          `json:"source"` // a path, "inline" or "handoff:<agent>"
	Kind    string          `json:"kind"`   // json or text
	Content json.RawMessage `json:"content"`
}

// ReadInput reads an input file: .json files are parsed as JSON, anything
// else is text.
func ReadInput(path string) (Input, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return Input{}, fmt.Errorf("%w: input: %w", ErrInvalidFile, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if !json.Valid(b) {
			return Input{}, &FileError{File: path, Msg: "input file is not valid JSON"}
		}
		return Input{Source: path, Kind: "json", Content: compactJSON(b)}, nil
	}
	return TextInput(path, string(b)), nil
}

// TextInput is inline or file text.
func TextInput(source, text string) Input {
	b, _ := json.Marshal(text) // a string always marshals
	return Input{Source: source, Kind: "text", Content: b}
}

func compactJSON(b []byte) json.RawMessage {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v) // decoded JSON always marshals
	return out
}

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

var schema = state.MustSchema(
	state.WithField("agent_id", state.ReducerReplace),
	state.WithField("steps", state.ReducerMerge),
	state.WithField("final_output", state.ReducerReplace),
	state.WithField("input", state.ReducerReplace),
)

// buildModel builds the agent's model from its front matter through the
// run's model registry; a scripted model's script is read inside the safe
// directory.
func (a *File) buildModel(c *confinement, models *model.Registry, getenv func(string) string, log *slog.Logger) (agent.Model, error) {
	m := a.Model
	if m.Provider == "" {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("model.provider is required (%s), or pass a model", strings.Join(models.Names(), ", "))}
	}
	cfg := model.Config{Provider: m.Provider, Model: m.ModelName, BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv,
		Temperature: m.Temperature, MaxTokens: m.MaxTokens, Script: m.Script, ReadFile: c.readFile, Getenv: getenv, Logger: log}
	out, err := models.Open(context.Background(), cfg)
	if err == nil {
		return out, nil
	}
	var fe *model.FieldError
	if errors.As(err, &fe) {
		return nil, &FileError{File: a.Path, Msg: "model." + fe.Error(), Err: err}
	}
	if errors.Is(err, model.ErrUnknownProvider) {
		return nil, &FileError{File: a.Path, Msg: "model.provider: " + err.Error(), Err: err}
	}
	return nil, &FileError{File: a.Path, Msg: err.Error(), Err: err}
}

// ErrMissingKey: the environment variable an agent file names for its API
// key is empty or unset.
var ErrMissingKey = model.ErrMissingKey

// loadSchemas compiles the schemas the chain uses; schema files are read
// inside the safe directory.
func (a *File) loadSchemas(c *confinement) (map[string]*agent.Schema, error) {
	out := map[string]*agent.Schema{}
	for name, n := range a.Schemas {
		var s *agent.Schema
		var err error
		switch n.Kind {
		case yaml.ScalarNode:
			b, rerr := c.readFile(n.Value)
			if rerr != nil {
				return nil, &FileError{File: a.Path, Line: n.Line + 1, Msg: fmt.Sprintf("schema %q: %v", name, rerr), Err: rerr}
			}
			if ext := strings.ToLower(filepath.Ext(n.Value)); ext == ".yaml" || ext == ".yml" {
				s, err = agent.SchemaFromYAML(n.Value, b)
			} else {
				s, err = agent.SchemaFromJSON(n.Value, b)
			}
		case yaml.MappingNode:
			b, merr := yaml.Marshal(n)
			if merr != nil {
				return nil, &FileError{File: a.Path, Line: n.Line + 1, Msg: merr.Error()}
			}
			s, err = agent.SchemaFromYAML(name, b)
		default:
			err = fmt.Errorf("want a schema file path or an inline schema")
		}
		if err != nil {
			return nil, &FileError{File: a.Path, Line: n.Line + 1, Msg: fmt.Sprintf("schema %q: %v", name, err), Err: err}
		}
		s.Name = name
		out[name] = s
	}
	return out, nil
}

// compile turns the agent file into a flow graph: one node per chain step
// (or one "instructions" node for an empty chain).
func (a *File) compile(model agent.Model, c *confinement, cfg RunConfig, mcp *mcpTools) (*flow.Compiled, error) {
	schemas, err := a.loadSchemas(c)
	if err != nil {
		return nil, err
	}
	tools, err := a.tools(c, cfg.Tools, mcp)
	if err != nil {
		return nil, err
	}
	if a.IsChat() {
		return a.compileChat(model, tools, cfg.Conversations)
	}
	g := flow.NewGraph(schema)
	steps := a.Chain
	if len(steps) == 0 {
		steps = []ChainStep{{ID: "instructions", Kind: "text"}}
	}
	var names []string
	for i, st := range steps {
		last := i == len(steps)-1
		text := a.Sections[st.section()]
		if len(a.Chain) == 0 {
			text = a.Instructions
		}
		g.AddNode(st.ID, a.stepNode(model, tools, st, text, schemas[st.OutputSchema], last))
		names = append(names, st.ID)
	}
	return g.Chain(names...).Compile()
}

// chainState is what every prompt shows of the state.
type chainState struct {
	AgentID     string          `json:"agent_id"`
	Steps       chainSteps      `json:"steps"`
	FinalOutput json.RawMessage `json:"final_output"`
}

// chainSteps is the state's steps as a prompt shows them: in chain order,
// as Quick Agent's dict keeps them (insertion order), then any other
// step's by name.
type chainSteps struct {
	order []string
	out   map[string]json.RawMessage
}

// MarshalJSON writes the steps in order.
func (s chainSteps) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(s.out))
	for _, k := range s.order {
		if _, ok := s.out[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	rest := make([]string, 0, len(s.out)-len(keys))
	for k := range s.out {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range append(keys, rest...) {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k) // a string always marshals
		b.Write(kj)
		b.WriteByte(':')
		b.Write(s.out[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// userPrompt is Quick Agent's prompt: the input's source and kind, its
// content, the chain state as JSON, and the step's instructions.
func userPrompt(in Input, st chainState, instructions string) string {
	var content string
	if in.Kind == "text" {
		_ = json.Unmarshal(in.Content, &content)
	} else {
		content = string(in.Content)
	}
	sj, _ := json.MarshalIndent(st, "", "  ") // plain data always marshals
	return fmt.Sprintf("## Input\nSource: %s (%s)\n\n%s\n\n## State\n%s\n\n## Task\n%s\n", in.Source, in.Kind, content, sj, instructions)
}

// stepIDs lists the chain's step ids in order.
func (a *File) stepIDs() []string {
	ids := make([]string, len(a.Chain))
	for i, st := range a.Chain {
		ids[i] = st.ID
	}
	return ids
}

func (a *File) stepNode(model agent.Model, tools []agent.Tool, st ChainStep, instructions string, sch *agent.Schema, last bool) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var in Input
		if err := d.Get("input", &in); err != nil {
			return nil, err
		}
		cs := chainState{AgentID: a.Name, Steps: chainSteps{order: a.stepIDs(), out: map[string]json.RawMessage{}}, FinalOutput: json.RawMessage("null")}
		if d.Has("steps") {
			if err := d.Get("steps", &cs.Steps.out); err != nil {
				return nil, err
			}
		}
		msgs := []agent.Message{}
		if a.System != "" {
			msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: a.System})
		}
		msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: userPrompt(in, cs, instructions)})
		req := agent.Request{Messages: msgs, Step: st.ID}
		var out json.RawMessage
		if st.Kind == "structured" {
			res, err := agent.GenerateStructured(ctx, model, req, sch, 2)
			if err != nil {
				return nil, fmt.Errorf("step %q: %w", st.ID, err)
			}
			out = res.Value
		} else if len(tools) > 0 {
			info, _ := flow.Info(ctx)
			kv := state.NewKV(d)
			res, err := agent.RunTools(ctx, model, req, tools, agent.LoopOptions{Context: agent.ToolContext{KV: kv, State: d, Key: info.Key}})
			if err != nil {
				return nil, fmt.Errorf("step %q: %w", st.ID, err)
			}
			out, _ = json.Marshal(res.Final.Content) // a string always marshals
		} else {
			resp, err := agent.Generate(ctx, model, req)
			flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output)
			if err != nil {
				return nil, fmt.Errorf("step %q: %w", st.ID, err)
			}
			out, _ = json.Marshal(resp.Message.Content) // a string always marshals
		}
		upd := state.Update{"steps": map[string]json.RawMessage{st.ID: out}}
		if last {
			upd["final_output"] = out
		}
		return upd, nil
	}
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

// Check makes every check a run of the agent file makes before its
// first step, touching no store: the safe directory inside cfg.AllowedRoot,
// the output file inside the safe directory, the model (its script, its
// key variable), the schemas, the tools and every handoff file (loaded and
// checked the same way). Errors are *FileError.
func Check(a *File, cfg RunConfig) error {
	p, err := prepare(a, cfg)
	if err != nil {
		return err
	}
	p.close()
	return nil
}

// prepared is an agent file ready to run: confined, its model built, its
// graph compiled, its handoff prepared.
type prepared struct {
	redact  *redact.Redactor // shared by the handoff chain
	a       *File
	allowed *os.Root // the allowed directory; closed by the first agent's close
	conf    *confinement
	mcp     *mcpTools // the file's connected MCP servers
	model   agent.Model
	models  *model.Registry
	graph   *flow.Compiled
	next    *prepared
}

// prepare checks and compiles an agent file and its handoff chain.
func prepare(a *File, cfg RunConfig) (*prepared, error) {
	allowedDir := cfg.AllowedRoot
	if allowedDir == "" {
		allowedDir = a.Dir()
	}
	allowedPath, err := realDir(allowedDir)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("allowed directory %s: %v", allowedDir, err), Err: err}
	}
	allowed, err := os.OpenRoot(allowedPath)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("allowed directory %s: %v", allowedDir, err), Err: err}
	}
	p := &prepared{allowed: allowed, models: cfg.models()}
	if err := p.load(a, cfg, allowedPath, map[string]bool{}); err != nil {
		p.close()
		return nil, err
	}
	if p.redact = cfg.Redact; p.redact == nil {
		if p.redact, err = p.redactor(cfg.Getenv); err != nil {
			p.close()
			return nil, err
		}
	}
	if secrets := p.mcpSecrets(); len(secrets) > 0 {
		p.redact = p.redact.WithSecrets(secrets...) // a pipeline's redactor too
	}
	for q := p.next; q != nil; q = q.next {
		q.redact = p.redact
	}
	return p, nil
}

// redactor builds the redactor of a handoff chain: the first file's
// defaults setting, every file's keys and patterns, and the values of the
// API key variables (those the files name, and every provider's default,
// such as OPENAI_API_KEY and ANTHROPIC_API_KEY).
func (p *prepared) redactor(getenv func(string) string) (*redact.Redactor, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := p.a.Secrets.RedactConfig()
	cfg.Keys, cfg.Patterns = nil, nil
	var keys []string // the providers' default variables: --model reads these
	for _, env := range p.models.KeyEnvs() {
		keys = append(keys, getenv(env))
	}
	for q := p; q != nil; q = q.next {
		cfg.Keys = append(cfg.Keys, q.a.Secrets.Keys...)
		cfg.Patterns = append(cfg.Patterns, q.a.Secrets.Patterns...)
		if env := q.a.Model.APIKeyEnv; env != "" {
			keys = append(keys, getenv(env))
		}
	}
	if p.next != nil || p.a.redactors == nil { // a handoff chain's redactor is its own
		return buildRedactor(p.a, cfg, keys)
	}
	return p.a.redactors.get(keys, func() (*redact.Redactor, error) { return buildRedactor(p.a, cfg, keys) })
}

// redactorCache keeps the redactor a file's runs last built, with the
// secret values it was built from: a run whose API key variables hold the
// same values reuses it (its expressions compiled once), one whose values
// changed builds its own. The file's secrets: settings are fixed once it
// is parsed.
type redactorCache struct {
	mu   sync.Mutex
	keys []string
	r    *redact.Redactor
}

func (c *redactorCache) get(keys []string, build func() (*redact.Redactor, error)) (*redact.Redactor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r != nil && slices.Equal(c.keys, keys) {
		return c.r, nil
	}
	r, err := build()
	if err != nil {
		return nil, err
	}
	c.keys, c.r = slices.Clone(keys), r
	return r, nil
}

// buildRedactor builds a redactor of a file's (or chain's) secrets
// settings and the API key values.
func buildRedactor(a *File, cfg redact.Config, keys []string) (*redact.Redactor, error) {
	r, err := redact.New(cfg)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: "secrets: " + err.Error(), Err: err}
	}
	if len(keys) > 0 {
		r = r.WithSecrets(keys...)
	}
	return r, nil
}

// load fills p (and its handoff chain) for a.
func (p *prepared) load(a *File, cfg RunConfig, allowedPath string, seen map[string]bool) error {
	p.a = a
	c, err := confine(a, p.allowed, allowedPath)
	if err != nil {
		return err
	}
	p.conf = c
	if p.model = cfg.Model; p.model == nil {
		if p.model, err = a.buildModel(c, cfg.models(), cfg.Getenv, cfg.Logger); err != nil {
			return err
		}
	}
	if p.mcp, err = a.connectMCP(c, getenvOr(cfg.Getenv)); err != nil {
		return err
	}
	if p.graph, err = a.compile(p.model, c, cfg, p.mcp); err != nil {
		return err
	}
	if a.Output.File != "" {
		if err := c.checkWritable(a.Output.File); err != nil {
			return &FileError{File: a.Path, Msg: "output.file: " + err.Error(), Err: err}
		}
	}
	if !a.Handoff.Enabled {
		return nil
	}
	seen[filepath.Join(c.base, filepath.Base(a.Path))] = true
	next, err := p.loadHandoff()
	if err != nil {
		return err
	}
	if next.IsChat() {
		return &FileError{File: a.Path, Line: a.keyLines["handoff"], Msg: fmt.Sprintf("handoff.agent_id %q: %s is a chat (kind: chat), which takes a conversation, not a handoff", a.Handoff.AgentID, next.Path)}
	}
	nextDir, err := realDir(next.Dir())
	if err != nil {
		return &FileError{File: a.Path, Msg: "handoff.agent_id: " + err.Error(), Err: err}
	}
	if seen[filepath.Join(nextDir, filepath.Base(next.Path))] {
		return &FileError{File: a.Path, Msg: fmt.Sprintf("handoff.agent_id %q: the handoff chain comes back to %s", a.Handoff.AgentID, next.Path)}
	}
	p.next = &prepared{allowed: p.allowed}
	return p.next.load(next, cfg, allowedPath, seen)
}

// loadHandoff reads and parses the handoff's agent file inside the safe
// directory (".md" is added to a name without an extension).
func (p *prepared) loadHandoff() (*File, error) {
	a, c := p.a, p.conf
	name := a.Handoff.AgentID
	rel, err := c.rel(name)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: "handoff.agent_id: " + err.Error(), Err: err}
	}
	if filepath.Ext(rel) == "" {
		if _, err := c.root.Stat(rel); errors.Is(err, fs.ErrNotExist) {
			rel += ".md"
		}
	}
	b, err := readfile.FromRoot(c.root, rel)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("handoff.agent_id %q: %v", name, err), Err: err}
	}
	return Parse(c.abs(rel), b)
}

// close releases the confinements.
func (p *prepared) close() {
	for q := p; q != nil; q = q.next {
		q.mcp.close()
		q.conf.close()
	}
	if p.allowed != nil {
		p.allowed.Close()
	}
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
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns})
	if errors.Is(err, store.ErrNotFound) {
		return upd, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if ns == "" && Unfinished(head) && !abandon {
		return nil, 0, fmt.Errorf("%w: thread %q checkpoint %d (%s)", ErrUnfinished, thread, head.Seq, head.Status)
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
		RecursionLimit: p.recursionLimit(), Items: cfg.Items})
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

// handoff runs the next agent on the final output in its own namespace:
// resuming the run there when it holds this very input, else a new run.
func (p *prepared) handoff(ctx context.Context, cfg RunConfig, ns string, resume bool, out *Result) (*Result, error) {
	in := Input{Source: "handoff:" + p.a.Name, Kind: "json", Content: out.FinalOutput}
	if !out.Structured {
		in.Kind = "text"
	}
	cfg.Input = in
	nextNS := "handoff:" + ThreadID(p.next.a.Name)
	if ns != "" {
		nextNS = ns + "/" + nextNS
	}
	return p.next.run(ctx, cfg, nextNS, resume && handoffStarted(ctx, cfg.Store, cfg.Thread, nextNS, in))
}

// ErrNoOutput: a run stopped with success but its state has no final
// output (a fork of a checkpoint with nothing left to run).
var ErrNoOutput = errors.New("agentfile: no final output")

// handoffStarted reports whether the handoff namespace holds a run of this
// very input, to be resumed (finished or not). After a fork whose final
// output differs, the handoff starts a new run on the new input instead.
func handoffStarted(ctx context.Context, s store.Store, thread, ns string, in Input) bool {
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns})
	if err != nil {
		return false
	}
	var had Input
	if err := head.State.Get("input", &had); err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(had.Content, &a) != nil || json.Unmarshal(in.Content, &b) != nil {
		return false
	}
	return had.Source == in.Source && had.Kind == in.Kind && reflect.DeepEqual(a, b)
}

// writeOutput writes the final output inside the safe directory: indented
// JSON for structured output (without HTML escaping: the file is read by
// people), the raw text otherwise.
func (p *prepared) writeOutput(r *Result) error {
	var data []byte
	if r.Structured {
		var v any
		if err := json.Unmarshal(r.FinalOutput, &v); err != nil {
			return err
		}
		b, err := jsontext.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		data = append(b, '\n')
	} else {
		var s string
		if err := json.Unmarshal(r.FinalOutput, &s); err != nil {
			return err
		}
		data = []byte(s)
	}
	if err := p.conf.writeFile(p.a.Output.File, data); err != nil {
		return err
	}
	rel, _ := p.conf.rel(p.a.Output.File) // checked by writeFile
	r.OutputFile = p.conf.abs(rel)
	return nil
}
