package agentfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/internal/mcptest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// mcpFile is an agent file whose front matter ends with front.
func mcpFile(front string) string {
	return "---\nname: m\nmodel: {provider: scripted, script: r.yaml}\n" + front + "---\n## Instructions\nx\n"
}

// TestMCPFrontMatterErrors: every mistake in mcp_servers: and in the tools:
// entries naming MCP tools is refused when the file is parsed, with its
// file and line.
func TestMCPFrontMatterErrors(t *testing.T) {
	tests := []struct {
		name, front, want string
	}{
		{"unknown server", "tools: [files.read]\n", `m.md:4: tools: "files.read" names MCP server "files", which mcp_servers: does not declare`},
		{"both", "mcp_servers:\n  - {name: s, command: ./srv, url: http://h/mcp}\ntools: [s.*]\n", "m.md:5: mcp_servers: mcptools: invalid server configuration: server s: give a command or a url, not both"},
		{"neither", "mcp_servers:\n  - {name: s}\ntools: [s.*]\n", "m.md:5: mcp_servers: mcptools: invalid server configuration: server s: give a command (stdio) or a url"},
		{"bad name", "mcp_servers:\n  - {name: my.files, command: ./srv}\ntools: [my.*]\n", `m.md:5: mcp_servers: mcptools: invalid server configuration: server name "my.files"`},
		{"duplicate server", "mcp_servers:\n  - {name: s, command: ./srv}\n  - {name: s, url: http://h/mcp}\ntools: [s.*]\n", `m.md:6: mcp_servers: server "s" appears twice (first at line 5)`},
		{"duplicate tool", "mcp_servers:\n  - {name: s, command: ./srv}\ntools:\n  - s.echo\n  - s.echo\n", `m.md:8: tools: "s.echo" appears twice (items 1 and 2)`},
		{"overlap", "mcp_servers:\n  - {name: s, command: ./srv}\ntools: [s.*, s.echo]\n", `m.md:6: tools: "s.echo" overlaps: s.* already lists every tool of s`},
		{"unused server", "mcp_servers:\n  - {name: s, command: ./srv}\n", `m.md:5: mcp_servers: no tool of server "s" is listed under tools:`},
		{"bad tool name", "mcp_servers:\n  - {name: s, command: ./srv}\ntools: [\"s.a b\"]\n", `m.md:6: tools: "s.a b": want s.<tool> or s.*`},
		{"bad timeout", "mcp_servers:\n  - {name: s, command: ./srv, timeout: soon}\ntools: [s.*]\n", `m.md:5: mcp_servers: server s: timeout "soon"`},
		{"bad reference", "mcp_servers:\n  - {name: s, command: ./srv, env: {T: \"${1X}\"}}\ntools: [s.*]\n", `m.md:5: mcp_servers: server s: "1X" is not a variable name (write ${NAME}) (in T)`},
		{"unclosed reference", "mcp_servers:\n  - {name: s, url: http://h/mcp, headers: {A: \"${KEY\"}}\ntools: [s.*]\n", `m.md:5: mcp_servers: server s: unclosed ${ in "${KEY" (in A)`},
		{"headers on a command", "mcp_servers:\n  - {name: s, command: ./srv, headers: {A: b}}\ntools: [s.*]\n", "m.md:5: mcp_servers: mcptools: invalid server configuration: server s: headers are for a url"},
		{"bad url", "mcp_servers:\n  - {name: s, url: \"file:///x\"}\ntools: [s.*]\n", `m.md:5: mcp_servers: mcptools: invalid server configuration: server s: url "file:///x"`},
		{"unknown key", "mcp_servers:\n  - {name: s, command: ./srv, cwd: /}\ntools: [s.*]\n", `unknown front-matter key "cwd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfile.Parse("m.md", []byte(mcpFile(tc.front)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, agentfile.ErrInvalidFile) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestMCPCheckedBeforeRun: a tool the server does not list, a server that
// cannot start and a ${NAME} that is not set are refused by Check (as by
// Run, before anything is stored), naming the line.
func TestMCPCheckedBeforeRun(t *testing.T) {
	dir := t.TempDir()
	bin := mcptest.Build(t, dir)
	writeFiles(t, dir, map[string]string{"r.yaml": "replies:\n  - text: hi\n"})
	tests := []struct {
		name, front, want string
		err               error
	}{
		{"unknown tool", "mcp_servers:\n  - {name: s, command: " + bin + "}\ntools:\n  - s.echo\n  - s.nope\n", `m.md:8: tools: s.nope: mcptools: the MCP server has no such tool: server s has no tool "nope" (it lists add, echo,`, agentfile.ErrMCP},
		{"no server", "mcp_servers:\n  - {name: s, command: ./missing-server}\ntools: [s.*]\n", "m.md:5: mcp_servers: mcptools: cannot connect to the MCP server: server s:", agentfile.ErrMCP},
		{"unset variable", "mcp_servers:\n  - {name: s, command: " + bin + ", env: {TOKEN: \"${CAIRN_TEST_UNSET_TOKEN}\"}}\ntools: [s.*]\n", "m.md:5: mcp_servers: server s: env: environment variable CAIRN_TEST_UNSET_TOKEN is not set (in TOKEN)", agentfile.ErrMCP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "m.md")
			writeFiles(t, dir, map[string]string{"m.md": mcpFile(tc.front)})
			a := loadAgent(t, path)
			s := inmem.Open(store.Options{})
			err := agentfile.Check(a, agentfile.RunConfig{})
			if err == nil || !strings.Contains(err.Error(), strings.Replace(tc.want, "m.md", path, 1)) || !errors.Is(err, tc.err) {
				t.Fatalf("Check: %v\nwant %q", err, tc.want)
			}
			if _, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "t", NewThread: map[string]any{}}); err == nil {
				t.Fatal("Run ran")
			}
			if _, err := s.Thread(context.Background(), "t"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused run left its thread: %v", err)
			}
		})
	}
}

// TestMCPToolsInAnAgentFile: a text step calls tools of a stdio server
// and of a streamable HTTP server that wants a bearer key from the
// environment; tool errors reach the model; the key never reaches the
// store.
func TestMCPToolsInAnAgentFile(t *testing.T) {
	dir := t.TempDir()
	bin := mcptest.Build(t, dir)
	const key = "mcp-key-5f1e2d3c4b5a6978"
	url := mcptest.StartHTTP(t, bin, []string{"MCPTEST_KEY=" + key})
	writeFiles(t, dir, map[string]string{
		"r.yaml": `replies:
  - tool_calls:
      - {name: local__echo, args: {text: hello}}
      - {name: remote__add, args: {a: 2, b: 40}}
      - {name: local__fail, args: {message: "no such record"}}
  - text: "echo said hello, the sum is 42, fail said no such record"
`,
		"m.md": mcpFile("mcp_servers:\n  - {name: local, command: " + bin + "}\n  - {name: remote, url: \"" + url + "\", headers: {Authorization: \"Bearer ${MCP_KEY}\"}}\ntools: [local.echo, local.fail, remote.add]\n"),
	})
	a := loadAgent(t, filepath.Join(dir, "m.md"))
	s := inmem.Open(store.Options{})
	getenv := func(k string) string {
		if k == "MCP_KEY" {
			return key
		}
		return os.Getenv(k)
	}
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "t", Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.FinalOutput), "the sum is 42") {
		t.Fatalf("final output %s", res.FinalOutput)
	}
	// Without the key the HTTP server refuses the connection: Check says so.
	if err := agentfile.Check(a, agentfile.RunConfig{Getenv: func(k string) string {
		if k == "MCP_KEY" {
			return "wrong-key-000000000000"
		}
		return ""
	}}); !errors.Is(err, agentfile.ErrMCP) || strings.Contains(err.Error(), key) {
		t.Fatalf("Check with a wrong key: %v", err)
	}
}
