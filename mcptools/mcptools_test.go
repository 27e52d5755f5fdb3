package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/internal/mcptest"
	"github.com/cairn-dev/cairn/mcptools"
)

// serverBin is the test server, built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptools-test")
	if err == nil {
		serverBin, err = mcptest.BuildIn(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// servers starts the test server both ways: as a stdio command and over
// streamable HTTP (with a bearer key), recording calls in calls.
func servers(t *testing.T, calls string) map[string]mcptools.Server {
	t.Helper()
	bin := serverBin
	url := mcptest.StartHTTP(t, bin, []string{"MCPTEST_KEY=k-123456789"}, "-calls", calls)
	return map[string]mcptools.Server{
		"stdio": {Name: "test", Command: bin, Args: []string{"-calls", calls}},
		"http":  {Name: "test", URL: url, Headers: map[string]string{"Authorization": "Bearer k-123456789"}},
	}
}

// TestCalls calls each kind of tool over both transports: results, the
// tool error, arguments checked against the listed schema, the key sent
// in _meta, a timeout; every failure is a typed error, never a panic.
func TestCalls(t *testing.T) {
	ctx := context.Background()
	calls := filepath.Join(t.TempDir(), "calls.log")
	for transport, srv := range servers(t, calls) {
		t.Run(transport, func(t *testing.T) {
			c, err := mcptools.Connect(ctx, srv)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := strings.Join(c.Names(), " "); !strings.Contains(got, "echo") || !strings.Contains(got, "record") {
				t.Fatalf("tools %s", got)
			}
			tests := []struct {
				name, tool, args string
				want             string
				wantErr          error
				errText          string
			}{
				{"text", "echo", `{"text":"hi"}`, `"hi"`, nil, ""},
				{"structured", "add", `{"a":2,"b":3}`, `{"sum":5}`, nil, ""},
				{"isError", "fail", `{"message":"disk full"}`, "", mcptools.ErrToolFailed, "disk full"},
				{"bad args", "add", `{"a":"two"}`, "", mcptools.ErrToolFailed, `want "number"`},
				{"unknown tool", "nope", `{}`, "", mcptools.ErrCall, "nope"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					got, err := c.Call(ctx, tc.tool, json.RawMessage(tc.args), "")
					if tc.wantErr != nil {
						if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
							t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.errText)
						}
						return
					}
					if err != nil || string(got) != tc.want {
						t.Fatalf("got %s, %v; want %s", got, err, tc.want)
					}
				})
			}
			if _, err := c.Call(ctx, "record", json.RawMessage(`{"note":"`+transport+`"}`), "thread/3/step/tool/0.1"); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(calls); !strings.Contains(string(b), transport+" thread/3/step/tool/0.1\n") {
				t.Fatalf("calls file %q: the key did not reach the server", b)
			}
		})
	}
}

// TestTimeout: a call slower than the server's timeout fails with ErrCall
// saying so, and the next call works.
func TestTimeout(t *testing.T) {
	ctx := context.Background()
	srv := servers(t, filepath.Join(t.TempDir(), "calls"))["stdio"]
	srv.Timeout = 200 * time.Millisecond
	c, err := mcptools.Connect(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Call(ctx, "slow", json.RawMessage(`{"ms":5000,"text":"late"}`), "")
	if !errors.Is(err, mcptools.ErrCall) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the timeout took %v", d)
	}
	if got, err := c.Call(ctx, "echo", json.RawMessage(`{"text":"again"}`), ""); err != nil || string(got) != `"again"` {
		t.Fatalf("after a timeout: %s, %v", got, err)
	}
}

// TestServerExits: a stdio server that dies in the middle of a call fails
// that call with ErrCall; the next call starts the server again.
func TestServerExits(t *testing.T) {
	ctx := context.Background()
	c, err := mcptools.Connect(ctx, servers(t, filepath.Join(t.TempDir(), "calls"))["stdio"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(ctx, "exit", nil, ""); !errors.Is(err, mcptools.ErrCall) {
		t.Fatalf("err = %v, want ErrCall", err)
	}
	if got, err := c.Call(ctx, "echo", json.RawMessage(`{"text":"back"}`), ""); err != nil || string(got) != `"back"` {
		t.Fatalf("after the server exited: %s, %v", got, err)
	}
}

// TestConnectFailures: a server that cannot be started or reached, or
// refuses the headers, is ErrConnect.
func TestConnectFailures(t *testing.T) {
	ctx := context.Background()
	srvs := servers(t, filepath.Join(t.TempDir(), "calls"))
	noKey := srvs["http"]
	noKey.Headers = nil
	tests := map[string]mcptools.Server{
		"missing command": {Name: "x", Command: filepath.Join(t.TempDir(), "no-such-server")},
		"not MCP":         {Name: "x", Command: "true"},
		"refused":         {Name: "x", URL: "http://127.0.0.1:1/mcp"},
		"no key":          noKey,
	}
	for name, srv := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := mcptools.Connect(ctx, srv)
			if !errors.Is(err, mcptools.ErrConnect) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("err = %v, want ErrConnect", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		srv  mcptools.Server
		ok   bool
	}{
		{"command", mcptools.Server{Name: "files", Command: "srv"}, true},
		{"url", mcptools.Server{Name: "search-2", URL: "https://example.org/mcp", Headers: map[string]string{"A": "b"}}, true},
		{"neither", mcptools.Server{Name: "files"}, false},
		{"both", mcptools.Server{Name: "files", Command: "srv", URL: "http://h/mcp"}, false},
		{"bad name", mcptools.Server{Name: "files.x", Command: "srv"}, false},
		{"underscore", mcptools.Server{Name: "my_files", Command: "srv"}, false},
		{"empty name", mcptools.Server{Command: "srv"}, false},
		{"scheme", mcptools.Server{Name: "s", URL: "ftp://h/mcp"}, false},
		{"no host", mcptools.Server{Name: "s", URL: "http:///mcp"}, false},
		{"headers on a command", mcptools.Server{Name: "s", Command: "srv", Headers: map[string]string{"A": "b"}}, false},
		{"env on a url", mcptools.Server{Name: "s", URL: "http://h/mcp", Env: map[string]string{"A": "b"}}, false},
		{"negative timeout", mcptools.Server{Name: "s", Command: "srv", Timeout: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.srv.Check()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, mcptools.ErrConfig)) {
				t.Fatalf("Check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestToolName(t *testing.T) {
	for in, want := range map[string]string{"read": "files__read", "read.file": "files__read_file", "a-b_c9": "files__a-b_c9", "dé": "files__d_"} {
		if got := mcptools.ToolName("files", in); got != want {
			t.Errorf("ToolName(files, %q) = %q, want %q", in, got, want)
		}
	}
}

// TestToolsInALoop: a model's tool loop calls MCP tools; a tool error
// and a bad argument go back to the model as results, the loop goes on.
func TestToolsInALoop(t *testing.T) {
	ctx := context.Background()
	c, err := mcptools.Connect(ctx, servers(t, filepath.Join(t.TempDir(), "calls"))["stdio"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools()
	if err != nil {
		t.Fatal(err)
	}
	m := &replay{replies: []agent.Message{
		{ToolCalls: []agent.ToolCall{
			{ID: "1", Name: "test__add", Args: json.RawMessage(`{"a":1,"b":2}`)},
			{ID: "2", Name: "test__fail", Args: json.RawMessage(`{"message":"no such file"}`)},
			{ID: "3", Name: "test__add", Args: json.RawMessage(`{"a":"one"}`)},
		}},
		{Content: "done"},
	}}
	res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}}, tools, agent.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := res.ToolResults
	if string(got[0].Output) != `{"sum":3}` || !strings.Contains(got[1].Error, "no such file") || !strings.Contains(got[2].Error, "arguments") {
		t.Fatalf("tool results %+v", got)
	}
	if res.Final.Content != "done" {
		t.Fatalf("final %q", res.Final.Content)
	}
}

// replay is a model answering with its replies in order.
type replay struct {
	replies []agent.Message
	n       int
}

func (r *replay) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	msg := r.replies[r.n]
	r.n++
	msg.Role = agent.RoleAssistant
	return agent.Response{Message: msg}, nil
}
