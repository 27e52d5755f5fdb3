package agentfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/mcptools"
)

// MCPServerSpec is one entry of mcp_servers:, an MCP server whose tools
// the file may list under tools: as "<name>.<tool>" or "<name>.*". A
// server is a command speaking MCP on stdio (command, args, env) or a
// streamable HTTP endpoint (url, headers). Values of env and headers may
// name environment variables as ${NAME}: they are read when the run
// starts, and what they hold is redacted like an API key.
type MCPServerSpec struct {
	Name string `yaml:"name"`
	// Command is the server's program; with a path separator it is
	// relative to the agent file's folder, which is also its working
	// directory. Without one it is looked up in PATH.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each tool call (a Go duration; default 60s).
	Timeout string `yaml:"timeout"`
	line    int
}

// ErrMCP: an MCP server of an agent file cannot be reached, or does not
// list a tool the file names.
var ErrMCP = errors.New("agentfile: MCP server")

// refRE matches a ${NAME} reference to an environment variable.
var refRE = regexp.MustCompile(`\$\{([^}]*)\}`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// mcpToolRE is an MCP tool name (the part after "<server>.").
var mcpToolRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// checkMCP checks mcp_servers: and the tools: entries that name their
// tools, without starting or reaching anything.
func (a *File) checkMCP() error {
	byName := map[string]*MCPServerSpec{}
	for i := range a.MCPServers {
		s := &a.MCPServers[i]
		if err := s.check(); err != nil {
			return &FileError{File: a.Path, Line: s.line, Msg: "mcp_servers: " + err.Error(), Err: err}
		}
		if byName[s.Name] != nil {
			return &FileError{File: a.Path, Line: s.line, Msg: fmt.Sprintf("mcp_servers: server %q appears twice (first at line %d)", s.Name, byName[s.Name].line)}
		}
		byName[s.Name] = s
	}
	used := map[string]bool{}
	seen := map[string]int{}
	star, one := map[string]bool{}, map[string]bool{} // server.* and server.<tool> listed
	for i, name := range a.Tools {
		line := a.toolItemLine(i)
		if j, dup := seen[name]; dup {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("tools: %q appears twice (items %d and %d)", name, j+1, i+1), Err: ErrToolName}
		}
		seen[name] = i
		server, tool, ok := strings.Cut(name, ".")
		if !ok {
			continue
		}
		if byName[server] == nil {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("tools: %q names MCP server %q, which mcp_servers: does not declare%s", name, server, declared(a.MCPServers)), Err: ErrToolName}
		}
		if tool != "*" && !mcpToolRE.MatchString(tool) {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("tools: %q: want %s.<tool> or %s.* (tool names use letters, digits, '_', '-' and '.')", name, server, server), Err: ErrToolName}
		}
		star[server] = star[server] || tool == "*"
		one[server] = one[server] || tool != "*"
		if star[server] && one[server] {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("tools: %q overlaps: %s.* already lists every tool of %s", name, server, server), Err: ErrToolName}
		}
		used[server] = true
	}
	for _, s := range a.MCPServers {
		if !used[s.Name] {
			return &FileError{File: a.Path, Line: s.line, Msg: fmt.Sprintf("mcp_servers: no tool of server %q is listed under tools: (add %s.* or %s.<tool>)", s.Name, s.Name, s.Name)}
		}
	}
	return nil
}

// declared lists the declared servers for an error message.
func declared(specs []MCPServerSpec) string {
	if len(specs) == 0 {
		return ""
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return " (declared: " + strings.Join(names, ", ") + ")"
}

// toolItemLine is the line of the i-th tools: item (that of tools: when
// unknown).
func (a *File) toolItemLine(i int) int {
	if i < len(a.toolLines) {
		return a.toolLines[i]
	}
	return a.toolLine
}

// check checks one server's entry: its shape and its ${NAME} references.
func (s *MCPServerSpec) check() error {
	if err := s.server(nil, nil).Check(); err != nil {
		return err
	}
	if s.Timeout != "" {
		if d, err := time.ParseDuration(s.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("server %s: timeout %q: want a positive duration such as 30s", s.Name, s.Timeout)
		}
	}
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for k, v := range m {
			if _, _, err := expandRefs(v, func(string) string { return "x" }); err != nil {
				return fmt.Errorf("server %s: %w (in %s)", s.Name, err, k) // not "key: value", which reads as a secret
			}
		}
	}
	for k := range s.Env {
		if !envNameRE.MatchString(k) {
			return fmt.Errorf("server %s: env: %q is not a variable name", s.Name, k)
		}
	}
	return nil
}

// server is the mcptools configuration of the entry, with env and headers
// as given (expanded ones when the run starts).
func (s *MCPServerSpec) server(env, headers map[string]string) mcptools.Server {
	if env == nil {
		env = s.Env
	}
	if headers == nil {
		headers = s.Headers
	}
	var timeout time.Duration
	if s.Timeout != "" {
		timeout, _ = time.ParseDuration(s.Timeout) // checked by check
	}
	return mcptools.Server{Name: s.Name, Command: s.Command, Args: s.Args, Env: env, URL: s.URL, Headers: headers, Timeout: timeout}
}

// expandRefs replaces each ${NAME} in v with the variable's value; it
// returns the values it put in (secrets). An unset or empty variable, or a
// malformed reference, is an error.
func expandRefs(v string, getenv func(string) string) (string, []string, error) {
	var secrets []string
	var err error
	out := refRE.ReplaceAllStringFunc(v, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if !envNameRE.MatchString(name) {
			err = errors.Join(err, fmt.Errorf("%q is not a variable name (write ${NAME})", name))
			return ref
		}
		val := getenv(name)
		if val == "" {
			err = errors.Join(err, fmt.Errorf("environment variable %s is not set", name))
		}
		secrets = append(secrets, val)
		return val
	})
	if err == nil && strings.Contains(refRE.ReplaceAllString(v, ""), "${") {
		err = fmt.Errorf("unclosed ${ in %q", v)
	}
	return out, secrets, err
}

// mcpTools are an agent file's connected MCP servers and the tools its
// tools: list takes from them, by tools: entry.
type mcpTools struct {
	clients []*mcptools.Client
	tools   map[string][]agent.Tool // "files.read", "search.*" → tools
	secrets []string                // values read from ${NAME} references
}

func (m *mcpTools) close() {
	if m == nil {
		return
	}
	for _, c := range m.clients {
		c.Close()
	}
}

// connectTimeout bounds starting a server and listing its tools.
const connectTimeout = 30 * time.Second

// connectMCP starts or reaches the file's MCP servers, lists their tools
// and picks those its tools: names; an error names the line of the server
// or of the tools: item. getenv reads ${NAME} references.
func (a *File) connectMCP(c *confinement, getenv func(string) string) (_ *mcpTools, err error) {
	if len(a.MCPServers) == 0 {
		return nil, nil
	}
	m := &mcpTools{tools: map[string][]agent.Tool{}}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	clients := map[string]*mcptools.Client{}
	for i := range a.MCPServers {
		s := &a.MCPServers[i]
		cl, err := m.connect(s, c, getenv)
		if err != nil {
			return nil, &FileError{File: a.Path, Line: s.line, Msg: "mcp_servers: " + err.Error(), Err: errors.Join(ErrMCP, err)}
		}
		clients[s.Name] = cl
	}
	for i, name := range a.Tools {
		server, tool, ok := strings.Cut(name, ".")
		if !ok {
			continue
		}
		var ts []agent.Tool
		if tool == "*" {
			ts, err = clients[server].Tools()
		} else {
			var t agent.Tool
			t, err = clients[server].Tool(tool)
			ts = []agent.Tool{t}
		}
		if err != nil {
			return nil, &FileError{File: a.Path, Line: a.toolItemLine(i), Msg: fmt.Sprintf("tools: %s: %v", name, err), Err: errors.Join(ErrMCP, err)}
		}
		m.tools[name] = ts
	}
	return m, nil
}

// connect expands one server's references and connects to it.
func (m *mcpTools) connect(s *MCPServerSpec, c *confinement, getenv func(string) string) (*mcptools.Client, error) {
	env, err := m.expand(s.Env, getenv)
	if err != nil {
		return nil, fmt.Errorf("server %s: env: %w", s.Name, err)
	}
	headers, err := m.expand(s.Headers, getenv)
	if err != nil {
		return nil, fmt.Errorf("server %s: headers: %w", s.Name, err)
	}
	srv := s.server(env, headers)
	if srv.Command != "" {
		if strings.ContainsRune(srv.Command, filepath.Separator) && !filepath.IsAbs(srv.Command) {
			srv.Command = filepath.Join(c.base, srv.Command)
		}
		srv.Dir = c.base
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	cl, err := mcptools.Connect(ctx, srv)
	if err != nil {
		return nil, err
	}
	m.clients = append(m.clients, cl)
	return cl, nil
}

// expand expands the ${NAME} references of a map's values, keeping the
// values read as secrets.
func (m *mcpTools) expand(in map[string]string, getenv func(string) string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		x, secrets, err := expandRefs(v, getenv)
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, k)
		}
		if len(secrets) > 0 {
			m.secrets = append(m.secrets, x)
			m.secrets = append(m.secrets, secrets...)
		}
		out[k] = x
	}
	return out, nil
}

// mcpSecrets are the values the handoff chain's MCP servers read from
// ${NAME} references.
func (p *prepared) mcpSecrets() []string {
	var out []string
	for q := p; q != nil; q = q.next {
		if q.mcp != nil {
			out = append(out, q.mcp.secrets...)
		}
	}
	return out
}

// getenvOr is getenv, or os.Getenv when nil.
func getenvOr(getenv func(string) string) func(string) string {
	if getenv == nil {
		return os.Getenv
	}
	return getenv
}
