package agentfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
)

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
	// pauseSchemas are the response schemas of the pauses before the
	// file's interrupt_before nodes (approval.response_schema).
	pauseSchemas map[string]json.RawMessage
	next         *prepared
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
	if a.Approval.ResponseSchema.Kind != 0 {
		schemas, err := a.loadSchemas(c) // compile read them: no error now
		if err != nil {
			return err
		}
		if p.pauseSchemas, err = a.responseSchemas(schemas); err != nil {
			return err
		}
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
