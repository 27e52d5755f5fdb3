package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cairn-dev/cairn/agent"
)

// Typed errors; every error this package returns wraps one of them.
var (
	// ErrConfig: a Server is malformed (a bad name, both or neither of
	// Command and URL, a URL that is not http or https, …).
	ErrConfig = errors.New("mcptools: invalid server configuration")
	// ErrConnect: the server could not be started or reached, or did not
	// complete the MCP handshake or the tool listing.
	ErrConnect = errors.New("mcptools: cannot connect to the MCP server")
	// ErrUnknownTool: the server lists no tool of that name.
	ErrUnknownTool = errors.New("mcptools: the MCP server has no such tool")
	// ErrCall: a tool call failed in transport — the server exited, broke
	// the protocol, answered with a JSON-RPC error or did not answer in
	// time.
	ErrCall = errors.New("mcptools: MCP tool call failed")
	// ErrToolFailed: the tool ran and reported an error (isError).
	ErrToolFailed = errors.New("mcptools: MCP tool reported an error")
)

// IdempotencyKeyMeta is the member of a tools/call request's _meta that
// carries the call's idempotency key (agent.ToolContext.Key): the same when
// a step runs again after a crash, so a server can make its side effects
// happen once.
const IdempotencyKeyMeta = "dev.cairn/idempotency-key"

// DefaultTimeout bounds a tool call when Server.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Server says how to reach one MCP server: a command started with stdio
// as the transport, or the URL of a streamable HTTP endpoint.
type Server struct {
	// Name names the server; its tools reach the model as
	// ToolName(Name, tool). Letters, digits and '-', starting with a
	// letter, at most 32 characters.
	Name string
	// Command and Args start a server speaking MCP on its stdin and
	// stdout. A Command without a path separator is looked up in PATH.
	Command string
	Args    []string
	// Env is added to the server process's environment, which otherwise
	// holds only PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG and TMPDIR
	// from this process: no other variable (no API key) leaks to it.
	Env map[string]string
	// Dir is the server process's working directory ("": this process's).
	Dir string
	// Stderr receives the server process's standard error (nil: discarded).
	Stderr io.Writer

	// URL is a streamable HTTP endpoint (http or https).
	URL string
	// Headers are sent with every HTTP request (Authorization, …).
	Headers map[string]string
	// HTTPClient carries the requests (nil: http.DefaultClient's transport).
	HTTPClient *http.Client

	// Timeout bounds each tool call (0: DefaultTimeout). A call that takes
	// longer is cancelled and fails with ErrCall.
	Timeout time.Duration
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// CheckName checks a server name (see Server.Name).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: server name %q: want a letter, then letters, digits or '-' (at most 32)", ErrConfig, name)
	}
	return nil
}

// Check checks the configuration without starting or reaching anything.
func (s Server) Check() error {
	if err := CheckName(s.Name); err != nil {
		return err
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("%w: server %s: give a command (stdio) or a url (streamable HTTP)", ErrConfig, s.Name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("%w: server %s: give a command or a url, not both", ErrConfig, s.Name)
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != ""):
		return fmt.Errorf("%w: server %s: args, env and dir are for a command, not a url", ErrConfig, s.Name)
	case s.Command != "" && len(s.Headers) > 0:
		return fmt.Errorf("%w: server %s: headers are for a url, not a command", ErrConfig, s.Name)
	case s.Timeout < 0:
		return fmt.Errorf("%w: server %s: negative timeout", ErrConfig, s.Name)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: server %s: url %q: want http:// or https:// and a host", ErrConfig, s.Name, s.URL)
		}
	}
	return nil
}

// ToolName is the name the model sees for a server's tool:
// "<server>__<tool>", the tool's characters other than letters, digits,
// '_' and '-' replaced by '_' (model providers accept no others).
func ToolName(server, tool string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString("__")
	for _, r := range tool {
		if r < 128 && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Client is a connection to one MCP server and the tools it listed when it
// connected. Safe for concurrent use. A stdio server that exits is started
// again on the next call.
type Client struct {
	srv    Server
	client *mcp.Client
	tools  []*mcp.Tool // as listed at Connect, in the server's order

	mu      sync.Mutex
	session *mcp.ClientSession // nil after the connection was lost
}

// Connect checks s, starts or reaches the server, completes the MCP
// handshake and lists the server's tools. Close the client when done (it
// stops a stdio server).
func Connect(ctx context.Context, s Server) (*Client, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	c := &Client{srv: s, client: mcp.NewClient(&mcp.Implementation{Name: "cairn", Version: "1"}, nil)}
	session, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.session = session
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return nil, fmt.Errorf("%w: server %s: tools/list: %v", ErrConnect, s.Name, err)
		}
		c.tools = append(c.tools, t)
	}
	return c, nil
}

// connect opens a session on the server's transport.
func (c *Client) connect(ctx context.Context) (*mcp.ClientSession, error) {
	var t mcp.Transport
	if c.srv.URL != "" {
		t = &mcp.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: c.srv.httpClient(), MaxRetries: -1}
	} else {
		cmd := exec.Command(c.srv.Command, c.srv.Args...)
		cmd.Env = c.srv.environ()
		cmd.Dir = c.srv.Dir
		cmd.Stderr = c.srv.Stderr
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	session, err := c.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", ErrConnect, c.srv.Name, err)
	}
	return session, nil
}

// inherited are the variables a stdio server gets from this process.
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR", "SYSTEMROOT"}

// environ is a stdio server's environment.
func (s Server) environ() []string {
	var env []string
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			if _, mine := s.Env[k]; !mine {
				env = append(env, k+"="+v)
			}
		}
	}
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// httpClient is the client of a streamable HTTP server, adding Headers.
func (s Server) httpClient() *http.Client {
	base := s.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	if len(s.Headers) == 0 {
		return base
	}
	out := *base
	rt := out.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	out.Transport = headerTransport{base: rt, headers: s.Headers}
	return &out
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// Name is the server's name.
func (c *Client) Name() string { return c.srv.Name }

// Names lists the server's tools by their MCP names, in the server's order.
func (c *Client) Names() []string {
	out := make([]string, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.Name
	}
	return out
}

// Close ends the session (and a stdio server's process).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	return err
}

// Tools returns every tool of the server as agent tools.
func (c *Client) Tools() ([]agent.Tool, error) {
	out := make([]agent.Tool, 0, len(c.tools))
	for _, t := range c.tools {
		at, err := c.tool(t)
		if err != nil {
			return nil, err
		}
		out = append(out, at)
	}
	return out, nil
}

// Tool returns the server's tool of that MCP name as an agent tool named
// ToolName(server, name), or ErrUnknownTool.
func (c *Client) Tool(name string) (agent.Tool, error) {
	for _, t := range c.tools {
		if t.Name == name {
			return c.tool(t)
		}
	}
	return agent.Tool{}, fmt.Errorf("%w: server %s has no tool %q (it lists %s)", ErrUnknownTool, c.srv.Name, name, strings.Join(c.Names(), ", "))
}

// tool wraps one listed tool: its input schema checks the arguments before
// the call, and the handler calls the server.
func (c *Client) tool(t *mcp.Tool) (agent.Tool, error) {
	name := ToolName(c.srv.Name, t.Name)
	at := agent.Tool{Name: name, Description: t.Description}
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return agent.Tool{}, fmt.Errorf("%w: server %s: tool %s: input schema: %v", ErrConnect, c.srv.Name, t.Name, err)
		}
		if at.Params, err = agent.SchemaFromJSON(name, b); err != nil {
			return agent.Tool{}, fmt.Errorf("%w: server %s: tool %s: input schema: %v", ErrConnect, c.srv.Name, t.Name, err)
		}
	}
	mcpName := t.Name
	at.Handler = func(ctx context.Context, tc agent.ToolContext, args json.RawMessage) (any, error) {
		return c.Call(ctx, mcpName, args, tc.Key)
	}
	return at, nil
}

// Call calls the server's tool name with JSON arguments (nil: none) and
// the call's idempotency key (sent in _meta as IdempotencyKeyMeta; empty:
// none), within Server.Timeout. It returns the tool's structured content
// when it has some, else its text content (joined by newlines) as a JSON
// string, else its content blocks as a JSON array. A tool that reports an
// error fails with ErrToolFailed and the tool's text; a call that fails in
// transport fails with ErrCall, and a stdio server that exited is started
// again on the next call.
func (c *Client) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	session, err := c.sessionFor(ctx)
	if err != nil {
		return nil, err
	}
	timeout := c.srv.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &mcp.CallToolParams{Name: name}
	if len(args) > 0 {
		p.Arguments = args
	}
	if key != "" {
		p.Meta = mcp.Meta{IdempotencyKeyMeta: key}
	}
	res, err := session.CallTool(cctx, p)
	if err != nil {
		return nil, c.callError(ctx, cctx, session, name, timeout, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%w: %s.%s: %s", ErrToolFailed, c.srv.Name, name, contentText(res.Content))
	}
	return resultJSON(res)
}

// sessionFor returns the live session, connecting again when the last one
// was lost.
func (c *Client) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	s, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCall, err)
	}
	c.session = s
	return s, nil
}

// callError describes a failed call; a session that failed other than by
// the call's own deadline or the caller's cancellation is dropped, so the
// next call connects again.
func (c *Client) callError(ctx, cctx context.Context, s *mcp.ClientSession, name string, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s.%s: %w", ErrCall, c.srv.Name, name, ctx.Err())
	case cctx.Err() != nil:
		return fmt.Errorf("%w: %s.%s: no answer within %v", ErrCall, c.srv.Name, name, timeout)
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		// The server answered with an error: it is alive.
		return fmt.Errorf("%w: %s.%s: %v", ErrCall, c.srv.Name, name, err)
	}
	c.mu.Lock()
	if c.session == s {
		c.session = nil
		go s.Close()
	}
	c.mu.Unlock()
	return fmt.Errorf("%w: %s.%s: the server's connection failed: %v", ErrCall, c.srv.Name, name, err)
}

// contentText is the text of content blocks, for an error message.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, ct := range content {
		if t, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		} else if b, err := json.Marshal(ct); err == nil {
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 {
		return "(no message)"
	}
	return strings.Join(parts, "\n")
}

// resultJSON is what the model is given of a successful call.
func resultJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("%w: structured content: %v", ErrCall, err)
		}
		return b, nil
	}
	allText := true
	var texts []string
	for _, ct := range res.Content {
		t, ok := ct.(*mcp.TextContent)
		if !ok {
			allText = false
			break
		}
		texts = append(texts, t.Text)
	}
	if allText {
		b, _ := json.Marshal(strings.Join(texts, "\n")) // a string always marshals
		return b, nil
	}
	b, err := json.Marshal(res.Content)
	if err != nil {
		return nil, fmt.Errorf("%w: content: %v", ErrCall, err)
	}
	return b, nil
}
