package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/redact"
)

// Metadata is the request a pipeline works on (seed 001).
type Metadata struct {
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
	// Approval pauses the pipeline before this gate until a person
	// approves (or edits the state, or rejects: the pipeline is FAILED).
	Approval bool `yaml:"approval"`
	line     int
}

// Pipeline is a parsed pipeline file.
type Pipeline struct {
	Path     string   `yaml:"-"`
	Name     string   `yaml:"name"`
	Metadata Metadata `yaml:"metadata"`
	// StateDir holds one folder per thread with the gate and pipeline
	// files (default .state next to the file).
	StateDir string `yaml:"state_dir"`
	// Secrets add to the default secret keys and shapes (or, with
	// defaults: false, replace them).
	Secrets agentfile.SecretsSpec `yaml:"secrets"`
	Gates   []GateSpec            `yaml:"gates"`

	contracts map[int]*agent.Schema
	redactor  *redact.Redactor
}

// ErrEmpty: a pipeline file has no content.
var ErrEmpty = errors.New("pipeline: pipeline file is empty")

// Load reads and checks a pipeline file.
func Load(path string) (*Pipeline, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return nil, &agentfile.FileError{File: path, Msg: err.Error(), Err: err}
	}
	return Parse(path, b)
}

// Parse parses a pipeline file.
func Parse(path string, data []byte) (*Pipeline, error) {
	var p Pipeline
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &agentfile.FileError{File: path, Msg: "pipeline file is empty", Err: ErrEmpty}
		}
		var root yaml.Node
		if yaml.Unmarshal(data, &root) == nil && len(root.Content) > 0 {
			return nil, agentfile.YAMLError(path, err, root.Content[0], 0, "pipeline key")
		}
		return nil, agentfile.YAMLError(path, err, nil, 0, "")
	}
	p.Path = path
	p.setGateLines(data)
	if err := p.check(); err != nil {
		return nil, err
	}
	r, err := redact.New(p.Secrets.RedactConfig())
	if err != nil {
		return nil, &agentfile.FileError{File: path, Msg: "secrets: " + err.Error(), Err: err}
	}
	p.redactor = r
	return &p, nil
}

// setGateLines remembers the line of each gate for error messages.
func (p *Pipeline) setGateLines(data []byte) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "gates" {
			continue
		}
		for j, item := range m.Content[i+1].Content {
			if j < len(p.Gates) {
				p.Gates[j].line = item.Line
			}
		}
	}
}

// check validates the parsed file and loads the contracts.
func (p *Pipeline) check() error {
	path := p.Path
	if p.Name == "" {
		return &agentfile.FileError{File: path, Line: 1, Msg: "name: is required"}
	}
	if p.Metadata.Domain == "" || p.Metadata.Feature == "" {
		return &agentfile.FileError{File: path, Msg: "metadata.domain and metadata.feature are required (they name the .state files)"}
	}
	if len(p.Gates) == 0 {
		return &agentfile.FileError{File: path, Msg: "gates: needs at least one gate"}
	}
	seen := map[int]bool{}
	p.contracts = map[int]*agent.Schema{}
	for i, g := range p.Gates {
		switch {
		case seen[g.Gate]:
			return &agentfile.FileError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d appears twice", g.Gate)}
		case g.Gate < 0:
			return &agentfile.FileError{File: path, Line: g.line, Msg: "gate numbers start at 0"}
		case (g.Agent == "") == (g.Step == ""):
			return &agentfile.FileError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d needs exactly one of agent: or step:", g.Gate)}
		case g.Threshold < 0 || g.Threshold > 100:
			return &agentfile.FileError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d: threshold %v must be within 0–100", g.Gate, g.Threshold)}
		case i > 0 && g.Gate <= p.Gates[i-1].Gate:
			return &agentfile.FileError{File: path, Line: g.line, Msg: "gates must be listed in increasing order"}
		}
		seen[g.Gate] = true
		if g.Contract != "" {
			s, err := p.loadContract(g.Contract)
			if err != nil {
				return &agentfile.FileError{File: path, Line: g.line, Msg: fmt.Sprintf("gate %d contract: %v", g.Gate, err), Err: err}
			}
			p.contracts[g.Gate] = s
		}
	}
	return nil
}

// Redactor returns the redactor of the file's secrets: (defaults and the
// secrets: section). Everything a pipeline run stores, shows or writes goes
// through it.
func (p *Pipeline) Redactor() *redact.Redactor { return p.redactor }

// loadContract reads a gate's contract schema (JSON, or YAML by its
// extension) inside the pipeline file's folder, through an os.Root, as an
// agent file reads inside its safe directory.
func (p *Pipeline) loadContract(name string) (*agent.Schema, error) {
	dir := filepath.Dir(p.Path)
	rel := name
	if filepath.IsAbs(name) {
		var err error
		if rel, err = filepath.Rel(dir, name); err != nil {
			return nil, fmt.Errorf("%w: %s is outside %s", agentfile.ErrUnsafePath, name, dir)
		}
	}
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%w: %s is outside %s, the pipeline file's folder", agentfile.ErrUnsafePath, name, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	b, err := readfile.FromRoot(root, rel)
	if err != nil {
		return nil, err
	}
	if ext := strings.ToLower(filepath.Ext(rel)); ext == ".yaml" || ext == ".yml" {
		return agent.SchemaFromYAML(name, b)
	}
	return agent.SchemaFromJSON(name, b)
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

// sanitizedMetadata is the metadata as the seed's files carry it: domain
// and feature sanitized.
func (p *Pipeline) sanitizedMetadata() Metadata {
	m := p.Metadata
	m.Domain, m.Feature = Sanitize(m.Domain), Sanitize(m.Feature)
	if m.AcceptanceCriteria == nil {
		m.AcceptanceCriteria = []string{}
	}
	return m
}

func filePrefix(m Metadata) string {
	return Sanitize(m.Domain) + "-" + Sanitize(m.Feature)
}

// BaseStateDir is the state_dir of the file (default .state next to it).
func (p *Pipeline) BaseStateDir() string {
	if p.StateDir == "" {
		return p.rel(".state")
	}
	return p.rel(p.StateDir)
}

// StateDirOf is the folder of one thread's files: state_dir/<thread>. Each
// thread (each run, each fork) has its own, so runs of one pipeline never
// overwrite each other's files.
func (p *Pipeline) StateDirOf(thread string) string {
	return filepath.Join(p.BaseStateDir(), thread)
}

// GateFilePath is state_dir/<thread>/{domain}-{feature}-gate{N}-output.json.
func (p *Pipeline) GateFilePath(thread string, n int) string {
	return gateFilePath(p.StateDirOf(thread), p.Metadata, n)
}

// PipelineFilePath is state_dir/<thread>/{domain}-{feature}-pipeline.json.
func (p *Pipeline) PipelineFilePath(thread string) string {
	return pipelineFilePath(p.StateDirOf(thread), p.Metadata)
}

func gateFilePath(dir string, m Metadata, n int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-gate%d-output.json", filePrefix(m), n))
}

func pipelineFilePath(dir string, m Metadata) string {
	return filepath.Join(dir, filePrefix(m)+"-pipeline.json")
}

// Gate statuses.
const (
	GateSuccess = "SUCCESS"
	GatePartial = "PARTIAL"
	GateFailed  = "FAILED"
	// PipelineInProgress is the pipeline file's status until its last gate
	// is done.
	PipelineInProgress = "IN_PROGRESS"
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

// File is the seed's pipeline state file.
type File struct {
	Status         string   `json:"status"` // IN_PROGRESS, SUCCESS, PARTIAL, FAILED
	CurrentGate    int      `json:"currentGate"`
	CompletedGates []int    `json:"completedGates"`
	Metadata       Metadata `json:"metadata"`
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

func gateNode(n int) string { return "gate" + strconv.Itoa(n) }

// gateOfNode reads the gate number back from a node name.
func gateOfNode(node string) (int, bool) {
	s, ok := strings.CutPrefix(node, "gate")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
