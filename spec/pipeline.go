package spec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// PipelineMetadata is the request a pipeline works on (seed 001).
type PipelineMetadata struct {
	Domain             string   `yaml:"domain" json:"domain"`
	Feature            string   `yaml:"feature" json:"feature"`
	URL                string   `yaml:"url" json:"url"`
	UserStory          string   `yaml:"userStory" json:"userStory"`
	AcceptanceCriteria []string `yaml:"acceptanceCriteria" json:"acceptanceCriteria"`
}

// GateSpec is one gate of a pipeline.
type GateSpec struct {
	Gate      int     `yaml:"gate"`
	Name      string  `yaml:"name"`     // the agent's name in the gate file
	Agent     string  `yaml:"agent"`    // an agent file, or
	Step      string  `yaml:"step"`     // a registered Go step
	Contract  string  `yaml:"contract"` // JSON Schema of the gate's output
	Threshold float64 `yaml:"threshold"`
	line      int
}

// SecretsSpec lists what must never be written.
type SecretsSpec struct {
	Keys     []string `yaml:"keys"`     // object keys whose values are redacted
	Patterns []string `yaml:"patterns"` // regular expressions redacted in strings
}

// Pipeline is a parsed pipeline file.
type Pipeline struct {
	Path     string           `yaml:"-"`
	Name     string           `yaml:"name"`
	Metadata PipelineMetadata `yaml:"metadata"`
	StateDir string           `yaml:"state_dir"` // default .state next to the file
	Secrets  SecretsSpec      `yaml:"secrets"`
	Gates    []GateSpec       `yaml:"gates"`

	contracts map[int]*agent.Schema
	redactor  *redactor
}

// GateStep is a gate written in Go: it gets the previous gate's output (or
// the pipeline's metadata) and returns its own output.
type GateStep func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// LoadPipeline reads and checks a pipeline file.
func LoadPipeline(path string) (*Pipeline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &SpecError{File: path, Msg: err.Error()}
	}
	return ParsePipeline(path, b)
}

// ParsePipeline parses a pipeline file.
func ParsePipeline(path string, data []byte) (*Pipeline, error) {
	var p Pipeline
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		var root yaml.Node
		if yaml.Unmarshal(data, &root) == nil && len(root.Content) > 0 {
			return nil, yamlErrorAt(path, err, root.Content[0], 0)
		}
		return nil, yamlError(path, err, 0)
	}
	p.Path = path
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil && len(root.Content) > 0 {
		m := root.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == "gates" {
				for j, item := range m.Content[i+1].Content {
					if j < len(p.Gates) {
						p.Gates[j].line = item.Line
					}
				}
			}
		}
	}
	if p.Name == "" {
		return nil, &SpecError{File: path, Line: 1, Msg: "name: is required"}
	}
	if p.Metadata.Domain == "" || p.Metadata.Feature == "" {
		return nil, &SpecError{File: path, Msg: "metadata.domain and metadata.feature are required (they name the .state files)"}
	}
	if len(p.Gates) == 0 {
		return nil, &SpecError{File: path, Msg: "gates: needs at least one gate"}
	}
	seen := map[int]bool{}
	p.contracts = map[int]*agent.Schema{}
	for _, g := range p.Gates {
		switch {
		case seen[g.Gate]:
			return nil, &SpecError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d appears twice", g.Gate)}
		case g.Gate < 0:
			return nil, &SpecError{File: path, Line: g.line, Msg: "gate numbers start at 0"}
		case (g.Agent == "") == (g.Step == ""):
			return nil, &SpecError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d needs exactly one of agent: or step:", g.Gate)}
		case g.Threshold < 0 || g.Threshold > 100:
			return nil, &SpecError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d: threshold %v must be within 0–100", g.Gate, g.Threshold)}
		}
		seen[g.Gate] = true
		if g.Contract != "" {
			s, err := agent.SchemaFromFile(p.rel(g.Contract))
			if err != nil {
				return nil, &SpecError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d contract: %v", g.Gate, err)}
			}
			p.contracts[g.Gate] = s
		}
	}
	for i := 1; i < len(p.Gates); i++ {
		if p.Gates[i].Gate <= p.Gates[i-1].Gate {
			return nil, &SpecError{File: path, Line: p.Gates[i].line, Msg: "gates must be listed in increasing order"}
		}
	}
	r, err := newRedactor(p.Secrets)
	if err != nil {
		return nil, &SpecError{File: path, Msg: "secrets: " + err.Error()}
	}
	p.redactor = r
	return &p, nil
}

func (p *Pipeline) rel(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(p.Path), path)
}

var (
	unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	repeats     = regexp.MustCompile(`_+`)
)

// Sanitize makes a domain or feature safe for file names: characters other
// than [a-zA-Z0-9-_] become _, repeats collapse, lowercase, at most 50.
func Sanitize(s string) string {
	s = repeats.ReplaceAllString(unsafeChars.ReplaceAllString(s, "_"), "_")
	s = strings.ToLower(s)
	if len(s) > 50 {
		s = s[:50]
	}
	return s
}

func (p *Pipeline) prefix() string {
	return Sanitize(p.Metadata.Domain) + "-" + Sanitize(p.Metadata.Feature)
}

func (p *Pipeline) stateDir() string {
	if p.StateDir == "" {
		return p.rel(".state")
	}
	return p.rel(p.StateDir)
}

// GateFilePath is .state/{domain}-{feature}-gate{N}-output.json.
func (p *Pipeline) GateFilePath(n int) string {
	return filepath.Join(p.stateDir(), fmt.Sprintf("%s-gate%d-output.json", p.prefix(), n))
}

// PipelineFilePath is .state/{domain}-{feature}-pipeline.json.
func (p *Pipeline) PipelineFilePath() string {
	return filepath.Join(p.stateDir(), p.prefix()+"-pipeline.json")
}

// Gate statuses.
const (
	GateSuccess = "SUCCESS"
	GatePartial = "PARTIAL"
	GateFailed  = "FAILED"
)

// GateFile is the seed's gate state file.
type GateFile struct {
	Gate       int             `json:"gate"`
	Agent      string          `json:"agent"`
	Status     string          `json:"status"`
	Metadata   GateMetadata    `json:"metadata"`
	Output     json.RawMessage `json:"output"`
	Validation Validation      `json:"validation"`
}

// GateMetadata is a gate file's metadata.
type GateMetadata struct {
	Domain  string `json:"domain"`
	Feature string `json:"feature"`
	URL     string `json:"url"`
}

// Validation is a gate's quality record.
type Validation struct {
	Score  float64  `json:"score"`
	Issues []string `json:"issues"`
	Passed bool     `json:"passed"`
}

// PipelineFile is the seed's pipeline state file.
type PipelineFile struct {
	Status         string           `json:"status"` // IN_PROGRESS, SUCCESS, PARTIAL, FAILED
	CurrentGate    int              `json:"currentGate"`
	CompletedGates []int            `json:"completedGates"`
	Metadata       PipelineMetadata `json:"metadata"`
}

// PipelineConfig says where and how a pipeline runs.
type PipelineConfig struct {
	Store    store.Store
	Thread   string
	Model    agent.Model // overrides every gate agent's model
	Steps    map[string]GateStep
	Observer func(flow.Event)
	Getenv   func(string) string
	// Warn receives warnings (a previous gate FAILED or missing).
	Warn func(string)
}

// PipelineResult is how a pipeline run ended.
type PipelineResult struct {
	Result   flow.Result
	Pipeline PipelineFile
	Gates    map[int]GateFile
}

var pipelineSchema = state.MustSchema(
	state.WithField("pipeline", state.ReducerReplace),
	state.WithField("gates", state.ReducerMerge),
)

// Compile turns the pipeline into a flow graph: one node per gate.
func (p *Pipeline) Compile(cfg PipelineConfig) (*flow.Compiled, error) {
	g := flow.NewGraph(pipelineSchema)
	var names []string
	for i, gs := range p.Gates {
		var prev *GateSpec
		if i > 0 {
			prev = &p.Gates[i-1]
		}
		name := "gate" + strconv.Itoa(gs.Gate)
		g.AddNode(name, p.gateNode(cfg, gs, prev))
		names = append(names, name)
	}
	return g.Chain(names...).Compile()
}

// RunPipeline runs (or, when the thread exists, resumes) a pipeline: only
// gates not completed run. The gate and pipeline files are written next to
// the store as each gate finishes.
func RunPipeline(ctx context.Context, p *Pipeline, cfg PipelineConfig) (*PipelineResult, error) {
	g, err := p.Compile(cfg)
	if err != nil {
		return nil, err
	}
	r, err := flow.NewRunner(g, cfg.Store, flow.Options{Observer: cfg.Observer})
	if err != nil {
		return nil, err
	}
	var res flow.Result
	head, lerr := cfg.Store.Load(ctx, store.LoadRequest{Thread: cfg.Thread})
	switch {
	case errors.Is(lerr, store.ErrNotFound):
		pf := PipelineFile{Status: "IN_PROGRESS", CurrentGate: p.Gates[0].Gate, CompletedGates: []int{}, Metadata: p.Metadata}
		if err := p.writePipelineFile(pf); err != nil {
			return nil, err
		}
		res, err = r.Invoke(ctx, cfg.Thread, state.Update{"pipeline": pf})
	case lerr != nil:
		return nil, lerr
	case len(head.Meta.Next) == 0 && head.Status == store.StatusSuccess:
		res = flow.Result{Thread: cfg.Thread, Head: head.Seq, State: head.State, StopReason: state.StopSuccess}
	default:
		res, err = r.Resume(ctx, cfg.Thread, nil)
	}
	out := &PipelineResult{Result: res, Gates: map[int]GateFile{}}
	if res.State.Has("pipeline") {
		_ = res.State.Get("pipeline", &out.Pipeline)
	}
	if res.State.Has("gates") {
		var gs map[string]GateFile
		if res.State.Get("gates", &gs) == nil {
			for k, v := range gs {
				n, _ := strconv.Atoi(k)
				out.Gates[n] = v
			}
		}
	}
	if err == nil && res.StopReason == state.StopSuccess && out.Pipeline.Status == "IN_PROGRESS" {
		// All gates done: the final status is the worst gate status.
		out.Pipeline.Status = GateSuccess
		for _, g := range out.Gates {
			if g.Status == GatePartial {
				out.Pipeline.Status = GatePartial
			}
		}
		if werr := p.writePipelineFile(out.Pipeline); werr != nil {
			return out, werr
		}
	}
	return out, err
}

func (p *Pipeline) gateNode(cfg PipelineConfig, gs GateSpec, prev *GateSpec) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var pf PipelineFile
		if err := d.Get("pipeline", &pf); err != nil {
			return nil, err
		}
		pf.CurrentGate = gs.Gate
		input := p.gateInput(prev, cfg.Warn)
		gf := GateFile{Gate: gs.Gate, Agent: gs.Name, Metadata: GateMetadata{Domain: Sanitize(p.Metadata.Domain), Feature: Sanitize(p.Metadata.Feature), URL: p.Metadata.URL}}
		out, runErr := p.runGate(ctx, cfg, gs, input)
		if runErr != nil {
			gf.Status, gf.Output = GateFailed, json.RawMessage("null")
			gf.Validation = Validation{Issues: []string{p.redactor.text(runErr.Error())}}
			pf.Status = GateFailed
			// FAILED is written too, then the step fails.
			if err := p.writeGateFile(gf); err != nil {
				return nil, errors.Join(runErr, err)
			}
			if err := p.writePipelineFile(pf); err != nil {
				return nil, errors.Join(runErr, err)
			}
			return nil, fmt.Errorf("gate %d: %w", gs.Gate, runErr)
		}
		out = p.redactor.json(out)
		gf.Output = out
		gf.Validation = p.validate(gs, out)
		gf.Status = GatePartial
		if gf.Validation.Passed {
			gf.Status = GateSuccess
		}
		if err := p.writeGateFile(gf); err != nil {
			return nil, err
		}
		pf.CompletedGates = append(slices.DeleteFunc(pf.CompletedGates, func(n int) bool { return n == gs.Gate }), gs.Gate)
		pf.Status = "IN_PROGRESS"
		if err := p.writePipelineFile(pf); err != nil {
			return nil, err
		}
		return state.Update{"pipeline": pf, "gates": map[string]GateFile{strconv.Itoa(gs.Gate): gf}}, nil
	}
}

// gateInput loads and checks the previous gate's file: SUCCESS and PARTIAL
// outputs that meet their contract are used; anything else is warned about
// and the gate falls back to the pipeline's metadata.
func (p *Pipeline) gateInput(prev *GateSpec, warn func(string)) json.RawMessage {
	meta, _ := json.Marshal(p.Metadata) // plain data always marshals
	if prev == nil {
		return meta
	}
	say := func(format string, args ...any) {
		if warn != nil {
			warn(fmt.Sprintf(format, args...))
		}
	}
	path := p.GateFilePath(prev.Gate)
	b, err := os.ReadFile(path)
	if err != nil {
		say("no previous gate state file %s; using the pipeline input", path)
		return meta
	}
	var gf GateFile
	if err := json.Unmarshal(b, &gf); err != nil {
		say("previous gate file %s is not valid JSON (%v); using the pipeline input", path, err)
		return meta
	}
	if gf.Status != GateSuccess && gf.Status != GatePartial {
		say("previous gate %d status %s; proceeding with the pipeline input", prev.Gate, gf.Status)
		return meta
	}
	if c := p.contracts[prev.Gate]; c != nil {
		if err := c.Validate(gf.Output); err != nil {
			say("previous gate %d output does not meet its contract (%v); using the pipeline input", prev.Gate, err)
			return meta
		}
	}
	return gf.Output
}

// runGate runs a gate's agent file (in its own namespace of the thread) or
// its registered Go step.
func (p *Pipeline) runGate(ctx context.Context, cfg PipelineConfig, gs GateSpec, input json.RawMessage) (json.RawMessage, error) {
	if gs.Step != "" {
		fn := cfg.Steps[gs.Step]
		if fn == nil {
			return nil, fmt.Errorf("%w: gate %d: no registered step %q", ErrSpec, gs.Gate, gs.Step)
		}
		return fn(ctx, input)
	}
	af, err := LoadAgentFile(p.rel(gs.Agent))
	if err != nil {
		return nil, err
	}
	ns := "gate" + strconv.Itoa(gs.Gate)
	acfg := RunConfig{Store: cfg.Store, Thread: cfg.Thread, Model: cfg.Model, Observer: cfg.Observer, Getenv: cfg.Getenv,
		Input: Input{Source: "gate" + strconv.Itoa(gs.Gate) + "-input", Kind: "json", Content: input}}
	// A gate that ran before (a crash or failure mid-gate) continues.
	res, err := runAgent(ctx, af, acfg, ns, namespaceStarted(ctx, cfg.Store, cfg.Thread, ns))
	if err != nil {
		return nil, err
	}
	if res.Result.StopReason != state.StopSuccess {
		return nil, fmt.Errorf("gate %d agent stopped: %s", gs.Gate, res.Result.StopReason)
	}
	return res.FinalOutput, nil
}

// validate scores a gate's output: contract issues, plus the output's own
// validationResult {score, issues} when it has one.
func (p *Pipeline) validate(gs GateSpec, out json.RawMessage) Validation {
	v := Validation{Score: 100, Issues: []string{}}
	contractOK := true
	if c := p.contracts[gs.Gate]; c != nil {
		if err := c.Validate(out); err != nil {
			contractOK = false
			var se *agent.SchemaError
			if errors.As(err, &se) {
				for _, is := range se.Issues {
					v.Issues = append(v.Issues, fmt.Sprintf("%s: %s", orRoot(is.Path), is.Message))
				}
			} else {
				v.Issues = append(v.Issues, err.Error())
			}
			v.Score = max(0, 100-20*float64(len(v.Issues)))
		}
	}
	var self struct {
		ValidationResult *struct {
			Score  *float64 `json:"score"`
			Issues []string `json:"issues"`
		} `json:"validationResult"`
	}
	if json.Unmarshal(out, &self) == nil && self.ValidationResult != nil {
		if self.ValidationResult.Score != nil {
			v.Score = min(v.Score, *self.ValidationResult.Score)
		}
		v.Issues = append(v.Issues, self.ValidationResult.Issues...)
	}
	v.Passed = contractOK && v.Score >= gs.Threshold
	return v
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func (p *Pipeline) writeGateFile(gf GateFile) error {
	return p.writeJSON(p.GateFilePath(gf.Gate), gf)
}

func (p *Pipeline) writePipelineFile(pf PipelineFile) error {
	if pf.CompletedGates == nil {
		pf.CompletedGates = []int{}
	}
	return p.writeJSON(p.PipelineFilePath(), pf)
}

// writeJSON writes indented JSON atomically (temporary file, then rename),
// with secrets redacted.
func (p *Pipeline) writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = p.redactor.json(b)
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// redactor removes configured secrets from JSON and text.
type redactor struct {
	keys     map[string]bool
	patterns []*regexp.Regexp
}

const redacted = "[REDACTED]"

func newRedactor(s SecretsSpec) (*redactor, error) {
	r := &redactor{keys: map[string]bool{}}
	for _, k := range s.Keys {
		r.keys[strings.ToLower(k)] = true
	}
	for _, p := range s.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", p, err)
		}
		r.patterns = append(r.patterns, re)
	}
	return r, nil
}

func (r *redactor) text(s string) string {
	for _, re := range r.patterns {
		s = re.ReplaceAllString(s, redacted)
	}
	return s
}

// json redacts a JSON document: values under secret keys, and pattern
// matches in every string.
func (r *redactor) json(b json.RawMessage) json.RawMessage {
	if len(r.keys) == 0 && len(r.patterns) == 0 {
		return b
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return b
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		return b
	}
	return out
}

func (r *redactor) walk(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if r.keys[strings.ToLower(k)] {
				t[k] = redacted
			} else {
				t[k] = r.walk(x)
			}
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = r.walk(x)
		}
		return t
	case string:
		return r.text(t)
	}
	return v
}

// ExportGateFiles writes a pipeline thread's gate and pipeline files into
// dir from the store alone (the .state layout), and returns their paths.
func ExportGateFiles(ctx context.Context, s store.Store, thread, dir string) ([]string, error) {
	cp, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return nil, err
	}
	if !cp.State.Has("pipeline") {
		return nil, fmt.Errorf("%w: thread %q is not a gate pipeline", ErrSpec, thread)
	}
	var pf PipelineFile
	if err := cp.State.Get("pipeline", &pf); err != nil {
		return nil, err
	}
	gates := map[string]GateFile{}
	if cp.State.Has("gates") {
		if err := cp.State.Get("gates", &gates); err != nil {
			return nil, err
		}
	}
	p := &Pipeline{Metadata: pf.Metadata, StateDir: dir, Path: filepath.Join(dir, "pipeline.yaml")}
	p.redactor, _ = newRedactor(SecretsSpec{})
	var paths []string
	for _, g := range gates {
		if err := p.writeGateFile(g); err != nil {
			return paths, err
		}
		paths = append(paths, p.GateFilePath(g.Gate))
	}
	if err := p.writePipelineFile(pf); err != nil {
		return paths, err
	}
	slices.Sort(paths)
	return append(paths, p.PipelineFilePath()), nil
}
