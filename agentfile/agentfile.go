package agentfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/internal/yamlerr"
	"github.com/cairn-dev/cairn/redact"
)

// ErrInvalidFile: an agent file or pipeline file is malformed. Errors say which
// file and line.
var ErrInvalidFile = errors.New("agentfile: invalid file")

// FileError names the file and line of a problem.
type FileError struct {
	File string
	Line int // 0 when the whole file is concerned
	Msg  string
	// Err is the underlying typed error (ErrUnsafePath, a provider's config
	// error, …), nil when the message says it all.
	Err error
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns ErrInvalidFile and the underlying error.
func (e *FileError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidFile, e.Err}
	}
	return []error{ErrInvalidFile}
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

// ApprovalSpec bounds the wait at an interrupt_before pause.
type ApprovalSpec struct {
	// Timeout is a Go duration ("30m", "2h").
	Timeout string `yaml:"timeout"`
	// Fallback answers a pause nobody answered in time: reject (the
	// default) or approve.
	Fallback string `yaml:"fallback"`
	// ResponseSchema is the JSON Schema of the value a person answers
	// the pause with (an edit's value, a command's resume): the name of
	// a schema under schemas: or an inline schema. An answer that does
	// not fit is refused (a server's 422) and changes nothing.
	ResponseSchema yaml.Node `yaml:"response_schema"`
}

// Deadline returns the parsed timeout (0: none) and the fallback action.
func (s ApprovalSpec) Deadline() (time.Duration, string, error) {
	fb := s.Fallback
	if fb == "" {
		fb = "reject"
	}
	if fb != "reject" && fb != "approve" {
		return 0, "", fmt.Errorf("approval.fallback %q: want reject or approve", s.Fallback)
	}
	if s.Timeout == "" {
		return 0, fb, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 {
		return 0, "", fmt.Errorf("approval.timeout %q: want a positive duration such as 30m or 2h", s.Timeout)
	}
	return d, fb, nil
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

// SecretsSpec says what a run redacts before anything is stored, shown or
// written (pipeline files and agent files). Keys and Patterns add to the
// defaults of package redact (password, token, api_key, sk-…, Bearer …);
// defaults: false turns the defaults off.
type SecretsSpec struct {
	Keys     []string `yaml:"keys"`     // object keys whose values are redacted
	Patterns []string `yaml:"patterns"` // regular expressions redacted in strings
	Defaults *bool    `yaml:"defaults"` // default true
}

// RedactConfig is the redact configuration the section describes.
func (s SecretsSpec) RedactConfig() redact.Config {
	return redact.Config{Keys: s.Keys, Patterns: s.Patterns, NoDefaults: s.Defaults != nil && !*s.Defaults}
}

// File is a parsed agent file (Quick Agent's format).
type File struct {
	Path string `yaml:"-"`
	// redactors keeps the redactor its runs last built (redactorCache).
	redactors   *redactorCache
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Kind is chain (the default: a chain of steps, each run on a fresh
	// chain state) or chat (an assistant that keeps the conversation of
	// its thread: see KindChat).
	Kind    string                `yaml:"kind"`
	Model   ModelSpec             `yaml:"model"`
	Tools   []string              `yaml:"tools"`
	Schemas map[string]*yaml.Node `yaml:"-"` // name → file path or inline schema
	Chain   []ChainStep           `yaml:"chain"`
	Output  OutputSpec            `yaml:"output"`
	Handoff HandoffSpec           `yaml:"handoff"`
	SafeDir string                `yaml:"safe_dir"`
	// InterruptBefore pauses a run before these chain steps (by id), for
	// a person to look before the step runs; resuming goes on.
	InterruptBefore []string `yaml:"interrupt_before"`
	// ApproveTools (a chat's) asks a person to approve the calls of these
	// tools (all: every tool) before they run: node tools raises an
	// interrupt whose value is LangChain's HITLRequest (see KindChat).
	ApproveTools ToolApproval `yaml:"approve_tools"`
	// ReviewFormat is the shape of that interrupt's value: langchain (the
	// default: LangChain's HITLRequest, what agent-chat-ui and
	// create_agent's human-in-the-loop middleware speak) or agent-inbox
	// (agent-inbox's HumanInterrupt list). Either answer is read in both.
	ReviewFormat string `yaml:"review_format"`
	// Approval says how long a pause waits for a person (a server answers
	// it with Fallback after Timeout); empty: it waits for ever.
	Approval ApprovalSpec `yaml:"approval"`
	Secrets  SecretsSpec  `yaml:"secrets"`
	// MCPServers are MCP servers whose tools tools: may list, as
	// "<server>.<tool>" or "<server>.*".
	MCPServers []MCPServerSpec `yaml:"mcp_servers"`
	// Memory is the namespace of the long-term memory store the memory
	// tools (memory_put, memory_get, memory_search, memory_delete) use.
	Memory MemorySpec `yaml:"memory"`

	// From the body.
	Instructions string
	System       string
	Sections     map[string]string // "step:<id>" → text

	toolLine  int   // the line of tools:, for errors
	toolLines []int // the line of each tools: item
	// keyLines holds the line of each front-matter key, sectionLines the
	// line of each body section (from the body's start), for errors.
	keyLines     map[string]int
	sectionLines map[string]int
}

// Load reads and checks an agent file.
func Load(path string) (*File, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return nil, &FileError{File: path, Msg: err.Error(), Err: err}
	}
	return Parse(path, b)
}

var sectionRE = regexp.MustCompile(`^##\s+(Instructions|System prompt|step:\s*([A-Za-z0-9_.-]+))\s*$`)

// Parse parses Markdown with YAML front matter. The body splits
// only at "## Instructions", "## System prompt" and "## step:<id>"; other
// headings stay in the section they are in.
func Parse(path string, data []byte) (*File, error) {
	front, body, bodyLine, err := splitFrontMatter(path, data)
	if err != nil {
		return nil, err
	}
	a := &File{Path: path, redactors: &redactorCache{}}
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
		return "", "", 0, &FileError{File: path, Line: 1, Msg: "an agent file starts with YAML front matter between --- lines"}
	}
	end := strings.Index(text[4:], "\n---")
	if end < 0 {
		return "", "", 0, &FileError{File: path, Line: 1, Msg: "front matter is not closed by a --- line"}
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
func (a *File) decodeFrontMatter(front string) error {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(front), &root); err != nil {
		return YAMLError(a.Path, err, nil, 1, "")
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return &FileError{File: a.Path, Line: 2, Msg: "front matter must be a YAML mapping"}
	}
	m := root.Content[0]
	rest, err := a.takeSchemas(m)
	if err != nil {
		return err
	}
	strict, err := yaml.Marshal(rest)
	if err != nil {
		return &FileError{File: a.Path, Msg: err.Error()}
	}
	dec := yaml.NewDecoder(bytes.NewReader(strict))
	dec.KnownFields(true)
	if err := dec.Decode(a); err != nil && !errors.Is(err, io.EOF) {
		return YAMLError(a.Path, err, rest, 1, "front-matter key")
	}
	a.noteLines(m)
	return nil
}

// takeSchemas takes schemas: (free-form YAML: paths or inline schemas) from
// the front matter's mapping and returns the other keys.
func (a *File) takeSchemas(m *yaml.Node) (*yaml.Node, error) {
	rest := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value != "schemas" {
			rest.Content = append(rest.Content, k, v)
			continue
		}
		if v.Kind != yaml.MappingNode {
			return nil, &FileError{File: a.Path, Line: v.Line + 1, Msg: "schemas: must map names to schema files or inline schemas"}
		}
		a.Schemas = map[string]*yaml.Node{}
		for j := 0; j+1 < len(v.Content); j += 2 {
			a.Schemas[v.Content[j].Value] = v.Content[j+1]
		}
	}
	return rest, nil
}

// noteLines records the file lines of the chain steps and of tools:.
func (a *File) noteLines(m *yaml.Node) {
	a.keyLines = map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		a.keyLines[k.Value] = k.Line + 1
		switch k.Value {
		case "tools":
			a.toolLine = k.Line + 1
			for _, item := range v.Content {
				a.toolLines = append(a.toolLines, item.Line+1)
			}
		case "mcp_servers":
			for j, item := range v.Content {
				if j < len(a.MCPServers) {
					a.MCPServers[j].line = item.Line + 1
				}
			}
		case "chain":
			for j, item := range v.Content {
				if j < len(a.Chain) {
					a.Chain[j].line = item.Line + 1
				}
			}
		case "memory":
			a.Memory.noteLines(k, v)
		}
	}
}

// readSections splits the body at its "## Instructions", "## System
// prompt" and "## step:<id>" headings.
func (a *File) readSections(body string) {
	a.Sections, a.sectionLines = map[string]string{}, map[string]int{}
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
	for n, line := range strings.Split(body, "\n") {
		if m := sectionRE.FindStringSubmatch(strings.TrimRight(line, " \t")); m != nil {
			flush()
			if m[2] != "" {
				cur = "step:" + m[2]
			} else {
				cur = m[1]
			}
			a.sectionLines[cur] = n
			continue
		}
		buf = append(buf, line)
	}
	flush()
}

// YAMLError turns an error of decoding YAML into a *FileError at its line
// in the file (the YAML starts offset lines into it). With keys (the
// mapping that was decoded strictly), an unknown key is reported at its
// own line as "unknown <what> KEY". Pipelines report their YAML errors
// through it too.
func YAMLError(path string, err error, keys *yaml.Node, offset int, what string) error {
	if keys != nil {
		if key, line, ok := yamlerr.UnknownKey(err, keys, offset); ok {
			return &FileError{File: path, Line: line, Msg: fmt.Sprintf("unknown %s %q", what, key)}
		}
	}
	line, msg := yamlerr.Where(err, offset)
	if keys != nil {
		line = 0 // strict decoding re-encodes the YAML: its lines are not the file's
	}
	return &FileError{File: path, Line: line, Msg: msg}
}

func (a *File) check(bodyLine int) error {
	if a.Name == "" {
		return &FileError{File: a.Path, Line: 2, Msg: "name: is required"}
	}
	switch a.Kind {
	case "", KindChain:
	case KindChat:
		return a.checkChat(bodyLine)
	default:
		return &FileError{File: a.Path, Line: a.keyLines["kind"], Msg: fmt.Sprintf("kind %q: want chain (the default) or chat", a.Kind)}
	}
	if line, ok := a.keyLines["approve_tools"]; ok {
		return &FileError{File: a.Path, Line: line, Msg: "approve_tools: is for chats (kind: chat): a chain's steps pause with interrupt_before"}
	}
	switch a.Output.Format {
	case "", "json", "markdown":
	default:
		return &FileError{File: a.Path, Msg: fmt.Sprintf("output.format %q: want json or markdown", a.Output.Format)}
	}
	seen := map[string]bool{}
	for _, st := range a.Chain {
		switch {
		case st.ID == "":
			return &FileError{File: a.Path, Line: st.line, Msg: "a chain step needs an id"}
		case seen[st.ID]:
			return &FileError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("chain step %q appears twice", st.ID)}
		case st.Kind != "text" && st.Kind != "structured":
			return &FileError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: unknown kind %q (text or structured)", st.ID, st.Kind)}
		case st.Kind == "structured" && st.OutputSchema == "":
			return &FileError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("structured step %q needs output_schema", st.ID)}
		}
		if st.OutputSchema != "" {
			if _, ok := a.Schemas[st.OutputSchema]; !ok {
				return &FileError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: unknown schema %q (declare it under schemas:)", st.ID, st.OutputSchema)}
			}
		}
		if _, ok := a.Sections[st.section()]; !ok {
			return &FileError{File: a.Path, Line: st.line, Msg: fmt.Sprintf("step %q: no \"## %s\" section in the body", st.ID, st.section())}
		}
		seen[st.ID] = true
	}
	if err := a.checkPauses(seen); err != nil {
		return err
	}
	if len(a.Chain) == 0 && a.Instructions == "" {
		return &FileError{File: a.Path, Line: bodyLine, Msg: "an agent without a chain needs a \"## Instructions\" section"}
	}
	if a.Handoff.Enabled && a.Handoff.AgentID == "" {
		return &FileError{File: a.Path, Msg: "handoff.enabled needs handoff.agent_id"}
	}
	if m := a.Handoff.InputMode; m != "" && m != "final_output" {
		return &FileError{File: a.Path, Msg: fmt.Sprintf("handoff.input_mode %q: only final_output is supported", m)}
	}
	return a.checkShared()
}

// checkShared checks what chains and chats share: secrets, memory and
// MCP servers.
func (a *File) checkShared() error {
	if _, err := redact.New(a.Secrets.RedactConfig()); err != nil {
		return &FileError{File: a.Path, Msg: "secrets: " + err.Error(), Err: err}
	}
	if err := a.checkMemory(); err != nil {
		return err
	}
	return a.checkMCP()
}

// checkPauses checks interrupt_before (steps of the chain, seen) and
// approval.
func (a *File) checkPauses(seen map[string]bool) error {
	for _, id := range a.InterruptBefore {
		if !seen[id] && (len(a.Chain) > 0 || id != "instructions") {
			return &FileError{File: a.Path, Msg: fmt.Sprintf("interrupt_before: %q is not a chain step", id)}
		}
	}
	if _, _, err := a.Approval.Deadline(); err != nil {
		return &FileError{File: a.Path, Msg: err.Error()}
	}
	if a.Approval.Timeout != "" && len(a.InterruptBefore) == 0 {
		return &FileError{File: a.Path, Msg: "approval.timeout needs interrupt_before: steps to pause before"}
	}
	return a.checkResponseSchema()
}

// section is the body section holding the step's prompt.
func (s ChainStep) section() string {
	if s.PromptSection != "" {
		return strings.Replace(s.PromptSection, "step: ", "step:", 1)
	}
	return "step:" + s.ID
}

// Dir is the directory paths in the file are relative to.
func (a *File) Dir() string { return filepath.Dir(a.Path) }

// ErrUnsafePath: a path leaves the agent's safe directory, or a safe_dir
// leaves the directory the command line allows.
var ErrUnsafePath = errors.New("agentfile: path outside the safe directory")
