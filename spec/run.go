package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/anthropic"
	"github.com/cairn-dev/cairn/model/openai"
	"github.com/cairn-dev/cairn/model/scripted"
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
	b, err := os.ReadFile(path)
	if err != nil {
		return Input{}, fmt.Errorf("%w: input: %v", ErrSpec, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if !json.Valid(b) {
			return Input{}, &SpecError{File: path, Msg: "input file is not valid JSON"}
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
	Store      store.Store
	Thread     string
	Input      Input
	Model      agent.Model // overrides the file's model
	Durability flow.Durability
	Observer   func(flow.Event)
	Getenv     func(string) string
	// Answer answers an interrupt when resuming.
	Answer any
}

// AgentResult is how an agent file's run ended.
type AgentResult struct {
	Agent       string
	Thread      string
	Namespace   string
	Result      flow.Result
	FinalOutput json.RawMessage // a JSON string for text outputs, the object for structured ones
	Structured  bool
	OutputFile  string
	Next        *AgentResult // the handoff's run
}

var schema = state.MustSchema(
	state.WithField("agent_id", state.ReducerReplace),
	state.WithField("steps", state.ReducerMerge),
	state.WithField("final_output", state.ReducerReplace),
	state.WithField("input", state.ReducerReplace),
)

// BuildModel builds the agent's model from its front matter.
func (a *AgentFile) BuildModel(getenv func(string) string) (agent.Model, error) {
	m := a.Model
	switch m.Provider {
	case "scripted":
		if m.Script == "" {
			return nil, &SpecError{File: a.Path, Msg: "model.script is required for the scripted provider"}
		}
		p, err := a.resolve(m.Script)
		if err != nil {
			return nil, &SpecError{File: a.Path, Msg: err.Error()}
		}
		return scripted.Load(p)
	case "openai-compatible":
		om, err := openai.New(openai.Config{BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, Model: m.ModelName, Temperature: m.Temperature, MaxTokens: m.MaxTokens, Getenv: getenv})
		if err != nil {
			return nil, &SpecError{File: a.Path, Msg: err.Error()}
		}
		return agent.WithRetry(om, agent.RetryPolicy{}), nil
	case "anthropic":
		am, err := anthropic.New(anthropic.Config{BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, Model: m.ModelName, Temperature: m.Temperature, MaxTokens: m.MaxTokens, Getenv: getenv})
		if err != nil {
			return nil, &SpecError{File: a.Path, Msg: err.Error()}
		}
		return agent.WithRetry(am, agent.RetryPolicy{}), nil
	}
	return nil, &SpecError{File: a.Path, Msg: "model.provider is required (openai-compatible, anthropic or scripted), or pass a model"}
}

// loadSchemas compiles the schemas the chain uses.
func (a *AgentFile) loadSchemas() (map[string]*agent.Schema, error) {
	out := map[string]*agent.Schema{}
	for name, n := range a.Schemas {
		var s *agent.Schema
		var err error
		switch n.Kind {
		case yaml.ScalarNode:
			p, rerr := a.resolve(n.Value)
			if rerr != nil {
				return nil, &SpecError{File: a.Path, Line: n.Line + 1, Msg: rerr.Error()}
			}
			s, err = agent.SchemaFromFile(p)
		case yaml.MappingNode:
			b, merr := yaml.Marshal(n)
			if merr != nil {
				return nil, &SpecError{File: a.Path, Line: n.Line + 1, Msg: merr.Error()}
			}
			s, err = agent.SchemaFromYAML(name, b)
		default:
			err = fmt.Errorf("want a schema file path or an inline schema")
		}
		if err != nil {
			return nil, &SpecError{File: a.Path, Line: n.Line + 1, Msg: fmt.Sprintf("schema %q: %v", name, err)}
		}
		s.Name = name
		out[name] = s
	}
	return out, nil
}

// Compile turns the agent file into a flow graph: one node per chain step
// (or one "instructions" node for an empty chain).
func (a *AgentFile) Compile(model agent.Model) (*flow.Compiled, error) {
	schemas, err := a.loadSchemas()
	if err != nil {
		return nil, err
	}
	tools, err := a.tools()
	if err != nil {
		return nil, err
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
	AgentID     string                     `json:"agent_id"`
	Steps       map[string]json.RawMessage `json:"steps"`
	FinalOutput json.RawMessage            `json:"final_output"`
}

// UserPrompt is Quick Agent's prompt: the input's source and kind, its
// content, the chain state as JSON, and the step's instructions.
func UserPrompt(in Input, st chainState, instructions string) string {
	var content string
	if in.Kind == "text" {
		_ = json.Unmarshal(in.Content, &content)
	} else {
		content = string(in.Content)
	}
	sj, _ := json.MarshalIndent(st, "", "  ") // plain data always marshals
	return fmt.Sprintf("## Input\nSource: %s (%s)\n\n%s\n\n## State\n%s\n\n## Task\n%s\n", in.Source, in.Kind, content, sj, instructions)
}

func (a *AgentFile) stepNode(model agent.Model, tools []agent.Tool, st ChainStep, instructions string, sch *agent.Schema, last bool) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var in Input
		if err := d.Get("input", &in); err != nil {
			return nil, err
		}
		cs := chainState{AgentID: a.Name, Steps: map[string]json.RawMessage{}, FinalOutput: json.RawMessage("null")}
		if d.Has("steps") {
			if err := d.Get("steps", &cs.Steps); err != nil {
				return nil, err
			}
		}
		msgs := []agent.Message{}
		if a.System != "" {
			msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: a.System})
		}
		msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: UserPrompt(in, cs, instructions)})
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
			resp, err := model.Generate(ctx, req)
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

// RunAgent runs an agent file on a thread, writes its output file and
// follows its handoff.
func RunAgent(ctx context.Context, a *AgentFile, cfg RunConfig) (*AgentResult, error) {
	return runAgent(ctx, a, cfg, "", false)
}

// ResumeAgent continues an agent file's run on a thread (after a crash or
// an interrupt), then writes its output and follows its handoff.
func ResumeAgent(ctx context.Context, a *AgentFile, cfg RunConfig) (*AgentResult, error) {
	return runAgent(ctx, a, cfg, "", true)
}

func runAgent(ctx context.Context, a *AgentFile, cfg RunConfig, ns string, resume bool) (*AgentResult, error) {
	model := cfg.Model
	if model == nil {
		var err error
		if model, err = a.BuildModel(cfg.Getenv); err != nil {
			return nil, err
		}
	}
	g, err := a.Compile(model)
	if err != nil {
		return nil, err
	}
	r, err := flow.NewRunner(g, cfg.Store, flow.Options{Durability: cfg.Durability, Observer: cfg.Observer, Namespace: ns})
	if err != nil {
		return nil, err
	}
	var res flow.Result
	if resume {
		res, err = r.Resume(ctx, cfg.Thread, cfg.Answer)
	} else {
		in := cfg.Input
		if in.Kind == "" {
			in = TextInput("inline", "")
		}
		res, err = r.Invoke(ctx, cfg.Thread, state.Update{"agent_id": a.Name, "input": in})
	}
	out := &AgentResult{Agent: a.Name, Thread: cfg.Thread, Namespace: ns, Result: res}
	if err != nil {
		return out, err
	}
	if res.StopReason != state.StopSuccess {
		return out, nil
	}
	if fo, ok := res.State.Raw("final_output"); ok {
		out.FinalOutput = fo
	}
	if len(a.Chain) > 0 && a.Chain[len(a.Chain)-1].Kind == "structured" {
		out.Structured = true
	}
	if a.Output.File != "" {
		p, err := a.resolve(a.Output.File)
		if err != nil {
			return out, &SpecError{File: a.Path, Msg: "output.file: " + err.Error()}
		}
		if err := writeOutput(p, out); err != nil {
			return out, err
		}
		out.OutputFile = p
	}
	if a.Handoff.Enabled {
		nextPath, err := a.resolve(a.Handoff.AgentID)
		if err != nil {
			return out, &SpecError{File: a.Path, Msg: "handoff.agent_id: " + err.Error()}
		}
		if _, err := os.Stat(nextPath); errors.Is(err, os.ErrNotExist) && filepath.Ext(nextPath) == "" {
			nextPath += ".md"
		}
		next, err := LoadAgentFile(nextPath)
		if err != nil {
			return out, err
		}
		in := Input{Source: "handoff:" + a.Name, Kind: "json", Content: out.FinalOutput}
		if !out.Structured {
			in.Kind = "text"
		}
		ncfg := cfg
		ncfg.Input, ncfg.Model = in, nil
		if cfg.Model != nil {
			ncfg.Model = cfg.Model
		}
		nextNS := "handoff:" + ThreadID(next.Name)
		if ns != "" {
			nextNS = ns + "/" + nextNS
		}
		nres, err := runAgent(ctx, next, ncfg, nextNS, resume && namespaceStarted(ctx, cfg.Store, cfg.Thread, nextNS))
		out.Next = nres
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// namespaceStarted reports whether a thread namespace (a handoff agent's, a
// gate's) already has checkpoints.
func namespaceStarted(ctx context.Context, s store.Store, thread, ns string) bool {
	_, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns})
	return err == nil
}

// writeOutput writes the final output: indented JSON for structured output,
// the raw text otherwise.
func writeOutput(path string, r *AgentResult) error {
	var data []byte
	if r.Structured {
		var v any
		if err := json.Unmarshal(r.FinalOutput, &v); err != nil {
			return err
		}
		b, err := json.MarshalIndent(v, "", "  ")
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
