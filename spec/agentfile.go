package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/redact"
)

// ErrSpec: an agent file or pipeline file is malformed. Errors say which
// file and line.
var ErrSpec = errors.New("spec: invalid file")

// SpecError names the file and line of a problem.
type SpecError struct {
	File string
	Line int // 0 when the whole file is concerned
	Msg  string
	// Err is the underlying typed error (ErrUnsafePath, a provider's config
	// error, …), nil when the message says it all.
	Err error
}

func (e *SpecError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns ErrSpec and the underlying error.
func (e *SpecError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrSpec, e.Err}
	}
	return []error{ErrSpec}
}

// ModelSpec configures the model of an agent file.
type ModelSpec struct {
	Provider    string   `yaml:"provider"` // openai-compatible, anthropic, scripted
	BaseURL     string   `yaml:"base_url"`
	APIKeyEnv   string   `yaml:"api_key_env"`
	ModelName   string   `yaml:"model_name"`
	Temperature *float64 `yaml:"temperature"`
	MaxTokens   int      `yaml:"max_tokens"`
	Script      string   `yaml:"script"` // scripted: the replies file
}

// ChainStep is one step of an agent's chain.
type ChainStep struct {
	ID            string `yaml:"id"`
	Kind          string `yaml:"kind"` // text or structured
	PromptSection string `yaml:"prompt_section"`
	OutputSchema  string `yaml:"output_schema"`
	line          int
}

// OutputSpec says where the final output goes.
type OutputSpec struct {
	Format string `yaml:"format"` // json or markdown
	File   string `yaml:"file"`
}

// HandoffSpec passes the final output to the next agent.
type HandoffSpec struct {
	Enabled   bool   `yaml:"enabled"`
	AgentID   string `yaml:"agent_id"`   // the next agent file, relative to this one
	InputMode string `yaml:"input_mode"` // final_output (default)
}

// config is the redact configuration the spec describes (SecretsSpec is
// shared with pipeline files).
func (s SecretsSpec) config() redact.Config {
	return redact.Config{Keys: s.Keys, Patterns: s.Patterns, NoDefaults: s.Defaults != nil && !*s.Defaults}
}

// AgentFile is a parsed agent file (Quick Agent's format).
type AgentFile struct {
	Path        string                `yaml:"-"`
	Name        string                `yaml:"name"`
	Description string                `yaml:"description"`
	Model       ModelSpec             `yaml:"model"`
	Tools       []string              `yaml:"tools"`
	Schemas     map[string]*yaml.Node `yaml:"-"` // name → file path or inline schema
	Chain       []ChainStep           `yaml:"chain"`
	Output      OutputSpec            `yaml:"output"`
	Handoff     HandoffSpec           `yaml:"handoff"`
	SafeDir     string                `yaml:"safe_dir"`
	Secrets     SecretsSpec           `yaml:"secrets"`

	// From the body.
	Instructions string
	System       string
	Sections     map[string]string // "step:<id>" → text

	toolLine int // the line of tools:, for errors
}

// LoadAgentFile reads and checks an agent file.
func LoadAgentFile(path string) (*AgentFile, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return nil, &SpecError{File: path, Msg: err.Error(), Err: err}
	}
	return ParseAgentFile(path, b)
}

var sectionRE = regexp.MustCompile(`^##\s+(Instructions|System prompt|step:\s*([A-Za-z0-9_.-]+))\s*$`)

// ParseAgentFile parses Markdown with YAML front matter. The body splits
// only at "## Instructions", "## System prompt" and "## step:<id>"; other
// headings stay in the section they are in.
func ParseAgentFile(path string, data []byte) (*AgentFile, error) {
	front, body, bodyLine, err := splitFrontMatter(path, data)
	if err != nil {
		return nil, err
	}
	a := &AgentFile{Path: path}
	if err := a.decodeFrontMatter(front); err != nil {
		return nil, err
	}
	a.readSections(body)
	if err := a.check(bodyLine); err != nil {
		return nil, err
	}
	return a, nil
}

// splitFrontMatter splits an agent file into its front matter (between the
// --- lines) and its body, which starts at line bodyLine.
func splitFrontMatter(path string, data []byte) (front, body string, bodyLine int, err error) {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return "", "", 0, &SpecError{File: path, Line: 1, Msg: "an agent file starts with YAML front matter between --- lines"}
	}
	end := strings.Index(text[4:], "\n---")
	if end < 0 {
		return "", "", 0, &SpecError{File: path, Line: 1, Msg: "front matter is not closed by a --- line"}
	}
	front = text[4 : 4+end+1]
	body = text[4+end+4:]
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = ""
	}
	return front, body, strings.Count(text[:len(text)-len(body)], "\n") + 1, nil
}

// decodeFrontMatter decodes the front matter strictly (unknown keys are
// errors with their line), keeping schemas: as YAML nodes and the lines
// of the chain steps and the tools for later errors.
func (a *AgentFile) decodeFrontMatter(front string) error {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(front), &root); err != nil {
		return yamlError(a.Path, err, 1)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return &SpecError{File: a.Path, Line: 2, Msg: "front matter must be a YAML mapping"}
	}
	m := root.Content[0]
	rest, err := a.takeSchemas(m)
	if err != nil {
		return err
	}
	strict, err := yaml.Marshal(rest)
	if err != nil {
		return &SpecError{File: a.Path, Msg: err.Error()}
	}
	dec := yaml.NewDecoder(bytes.NewReader(strict))
	dec.KnownFields(true)
	if err := dec.Decode(a); err != nil && !errors.Is(err, io.EOF) {
		return yamlErrorAt(a.Path, err, rest, 1, "front-matter key")
	}
	a.noteLines(m)
	return nil
}

// takeSchemas takes schemas: (free-form YAML: paths or inline schemas) from
// the front matter's mapping and returns the other keys.
func (a *AgentFile) takeSchemas(m *yaml.Node) (*yaml.Node, error) {
	rest := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value != "schemas" {
			rest.Content = append(rest.Content, k, v)
			continue
		}
		if v.Kind != yaml.MappingNode {
			return nil, &SpecError{File: a.Path, Line: v.Line + 1, Msg: "schemas: must map names to schema files or inline schemas"}
		}
		a.Schemas = map[string]*yaml.Node{}
		for j := 0; j+1 < len(v.Content); j += 2 {
			a.Schemas[v.Content[j].Value] = v.Content[j+1]
		}
	}
	return rest, nil
}

// noteLines records the file lines of the chain steps and of tools:.
func (a *AgentFile) noteLines(m *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "tools":
			a.toolLine = k.Line + 1
		case "chain":
			for j, item := range v.Content {
				if j < len(a.Chain) {
					a.Chain[j].line = item.Line + 1
				}
			}
		}
	}
}

// readSections splits the body at its "## Instructions", "## System
// prompt" and "## step:<id>" headings.
func (a *AgentFile) readSections(body string) {
	a.Sections = map[string]string{}
	var cur string
	var buf []string
	flush := func() {
		text := strings.TrimSpace(strings.Join(buf, "\n"))
		switch {
		case cur == "Instructions":
			a.Instructions = text
		case cur == "System prompt":
			a.System = text
		case cur != "":
			a.Sections[cur] = text
		}
		buf = buf[:0]
	}
	for _, line := range strings.Split(body, "\n") {
		if m := sectionRE.FindStringSubmatch(strings.TrimRight(line, " \t")); m != nil {
			flush()
			if m[2] != "" {
				cur = "step:" + m[2]
			} else {
				cur = m[1]
			}
			continue
		}
		buf = append(buf, line)
	}
	flush()
}

var (
	lineRE    = regexp.MustCompile(`line (\d+): (.*)`)
	unknownRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// yamlError turns a YAML error into a SpecError at the file's line (the
// front matter starts offset lines into the file).
func yamlError(path string, err error, offset int) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &line)
		line += offset
		msg = m[2]
	}
	return &SpecError{File: path, Line: line, Msg: strings.TrimSpace(msg)}
}

// yamlErrorAt reports a strict-decoding error at the line of the original
// key in n (whose lines are offset lines into the file); what names the
// kind of key ("front-matter key", "pipeline key").
func yamlErrorAt(path string, err error, n *yaml.Node, offset int, what string) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
	if m := unknownRE.FindStringSubmatch(msg); m != nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == m[1] {
				return &SpecError{File: path, Line: n.Content[i].Line + offset, Msg: fmt.Sprintf("unknown %s %q", what, m[1])}
			}
		}
		return &SpecError{File: path, Msg: fmt.Sprintf("unknown %s %q", what, m[1])}
	}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		msg = m[2]
	}
	return &SpecError{File: path, Msg: strings.TrimSpace(msg)}
}

func (a *AgentFile) check(bodyLine int) error {
	if a.Name == "" {
		return &SpecError{File: a.Path, Line: 2, Msg: "name: is required"}
	}
	switch a.Output.Format {
	case "", "json", "markdown":
	default:
		return &SpecError{File: a.Path, Msg: fmt.Sprintf("output.format %q: want json or markdown", a.Output.Format)}
	}
	seen := map[string]bool{}
	for _, st := range a.Chain {
		switch {
		case st.ID == "":
			return &SpecError{File: a.Path, Line: st.line, Msg: "a chain step needs an id"}
		case seen[st.ID]:
			return &SpecError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("chain step %q appears twice", st.ID)}
		case st.Kind != "text" && st.Kind != "structured":
			return &SpecError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: unknown kind %q (text or structured)", st.ID, st.Kind)}
		case st.Kind == "structured" && st.OutputSchema == "":
			return &SpecError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("structured step %q needs output_schema", st.ID)}
		}
		if st.OutputSchema != "" {
			if _, ok := a.Schemas[st.OutputSchema]; !ok {
				return &SpecError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: unknown schema %q (declare it under schemas:)", st.ID, st.OutputSchema)}
			}
		}
		if _, ok := a.Sections[st.section()]; !ok {
			return &SpecError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: no \"## %s\" section in the body", st.ID, st.section())}
		}
		seen[st.ID] = true
	}
	if len(a.Chain) == 0 && a.Instructions == "" {
		return &SpecError{File: a.Path, Line: bodyLine, Msg: "an agent without a chain needs a \"## Instructions\" section"}
	}
	if a.Handoff.Enabled && a.Handoff.AgentID == "" {
		return &SpecError{File: a.Path, Msg: "handoff.enabled needs handoff.agent_id"}
	}
	if m := a.Handoff.InputMode; m != "" && m != "final_output" {
		return &SpecError{File: a.Path, Msg: fmt.Sprintf("handoff.input_mode %q: only final_output is supported", m)}
	}
	if _, err := redact.New(a.Secrets.config()); err != nil {
		return &SpecError{File: a.Path, Msg: "secrets: " + err.Error(), Err: err}
	}
	return nil
}

// section is the body section holding the step's prompt.
func (s ChainStep) section() string {
	if s.PromptSection != "" {
		return strings.Replace(s.PromptSection, "step: ", "step:", 1)
	}
	return "step:" + s.ID
}

// Dir is the directory paths in the file are relative to.
func (a *AgentFile) Dir() string { return filepath.Dir(a.Path) }

// ErrUnsafePath: a path leaves the agent's safe directory, or a safe_dir
// leaves the directory the command line allows.
var ErrUnsafePath = errors.New("spec: path outside the safe directory")
