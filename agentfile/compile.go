package agentfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/state"
)

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
