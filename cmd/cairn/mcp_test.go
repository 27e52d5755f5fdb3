package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/mcptest"
	"github.com/cairn-dev/cairn/store"
)

// mcpAgent writes an agent file using MCP servers (front: its
// mcp_servers: and tools:) with the scripted replies, in dir.
func mcpAgent(t *testing.T, dir, front, replies string) string {
	t.Helper()
	files := map[string]string{
		"agent.md":     "---\nname: mcp-agent\nmodel: {provider: scripted, script: replies.yaml}\n" + front + "---\n## Instructions\nUse the tools.\n",
		"replies.yaml": replies,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.md")
}

// callLines are the lines the test server's record tool wrote.
func callLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "|"))
}

// TestMCPRun: cairn run FILE with a stdio server and a streamable HTTP
// server whose bearer key comes from the environment; each call's key
// reaches the server; a tool error, a call over its timeout and a server
// that exits mid-call go back to the model and the run goes on (the
// server is started again); a refused file exits 2 naming its line and
// leaves no store.
func TestMCPRun(t *testing.T) {
	dir := t.TempDir()
	bin := mcptest.Build(t, dir)
	calls := filepath.Join(dir, "calls.log")
	url := mcptest.StartHTTP(t, bin, []string{"MCPTEST_KEY=bearer-key-0123456789"})
	agentFile := mcpAgent(t, dir, `mcp_servers:
  - {name: files, command: ./mcptest-server, args: [-calls, calls.log]}
  - {name: search, url: "`+url+`", headers: {Authorization: "Bearer ${SEARCH_KEY}"}, timeout: 10s}
  - {name: slow, command: ./mcptest-server, timeout: 300ms}
tools: [files.record, files.fail, files.exit, search.*, slow.slow]
`, `replies:
  - tool_calls:
      - {name: files__record, args: {note: hello}}
      - {name: search__add, args: {a: 40, b: 2}}
      - {name: files__fail, args: {message: "disk full"}}
      - {name: slow__slow, args: {ms: 10000, text: late}}
      - {name: files__exit, args: {}}
  - tool_calls:
      - {name: files__record, args: {note: again}}
  - text: "recorded; 42; the failure was reported"
`)
	db := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + db, "SEARCH_KEY": "bearer-key-0123456789"}
	code, out, errOut := cli(t, env, "run", agentFile, "--thread", "m1")
	if code != 0 || !strings.Contains(out, "recorded; 42; the failure was reported") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if got := callLines(t, calls); len(got) != 2 || !strings.HasPrefix(got[0], "hello|m1/") || !strings.HasSuffix(got[0], "/instructions/tool/0.0") ||
		!strings.HasPrefix(got[1], "again|m1/") || !strings.HasSuffix(got[1], "/instructions/tool/1.0") {
		t.Fatalf("calls %v: want the call after the server exited made on a new server", got)
	}
	// What the model was told, as the step's journal recorded it.
	journal := journalEntries(t, "sqlite:"+db, "m1")
	for name, want := range map[string]string{
		"tool/0.1": `"output":{"sum":42}`,
		"tool/0.2": "MCP tool reported an error: files.fail: disk full",
		"tool/0.3": "MCP tool call failed: slow.slow: no answer within 300ms",
		"tool/0.4": "MCP tool call failed: files.exit: the server's connection failed",
		"tool/1.0": `"output":"recorded again"`,
	} {
		if !strings.Contains(journal[name], want) {
			t.Errorf("journal %s = %s, want %q", name, journal[name], want)
		}
	}
	if code, out, _ := cli(t, env, "state", "m1"); code != 0 || !strings.Contains(out, "the failure was reported") {
		t.Fatalf("state: %d %s", code, out)
	}

	// Refused before anything is stored: a tool the server does not list,
	// a variable that is not set.
	for name, tc := range map[string]struct{ front, want string }{
		"unknown tool": {"mcp_servers:\n  - {name: files, command: ./mcptest-server}\ntools: [files.echo, files.rm]\n", `agent.md:6: tools: files.rm: mcptools: the MCP server has no such tool: server files has no tool "rm"`},
		"unset key":    {"mcp_servers:\n  - {name: search, url: \"" + url + "\", headers: {Authorization: \"Bearer ${SEARCH_KEY}\"}}\ntools: [search.*]\n", "agent.md:5: mcp_servers: server search: headers: environment variable SEARCH_KEY is not set (in Authorization)"},
	} {
		t.Run(name, func(t *testing.T) {
			fresh := filepath.Join(t.TempDir(), "fresh.db")
			agentFile := mcpAgent(t, dir, tc.front, "replies:\n  - text: hi\n")
			code, _, errOut := cli(t, map[string]string{"CAIRN_STORE": "sqlite:" + fresh}, "run", agentFile)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d: %s\nwant %q", code, errOut, tc.want)
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Fatalf("a refused run created the store: %v", err)
			}
		})
	}
}

// journalEntries reads the journal entries of a thread's root namespace,
// by name (model/0, tool/0.1, …).
func journalEntries(t *testing.T, url, thread string) map[string]string {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := s.Thread(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for seq := int64(0); seq <= th.Head; seq++ {
		ws, err := s.Writes(context.Background(), thread, "", seq)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if i := strings.Index(w.Task, "/instructions/"); strings.HasPrefix(w.Task, "journal/") && i >= 0 {
				out[w.Task[i+len("/instructions/"):]] = string(w.Update)
			}
		}
	}
	return out
}

// TestMCPKilledAndResumed kills a real cairn run with SIGKILL while its
// tool loop is in its second MCP call (the first completed), then resumes
// it in a new process: the completed call is not made again, the one in
// flight is made again with the same idempotency key, and the run ends as
// an uninterrupted one does.
func TestMCPKilledAndResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	mcptest.Build(t, dir) // ./mcptest-server beside the agent file
	calls := filepath.Join(dir, "calls.log")
	agentFile := mcpAgent(t, dir, "mcp_servers:\n  - {name: t, command: ./mcptest-server, args: [-calls, calls.log]}\ntools: [t.record]\n", `replies:
  - tool_calls: [{name: t__record, args: {note: first}}]
  - tool_calls: [{name: t__record, args: {note: second, ms: 1500}}]
  - tool_calls: [{name: t__record, args: {note: third}}]
  - text: "three notes recorded"
`)
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	cmd := cairnProcess(t, []string{"CAIRN_STORE=" + url}, "run", agentFile, "--thread", "k")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	crashtest.WaitFor(t, 30*time.Second, "the second call", func() bool { return crashtest.FileContains(calls, "second ") })
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); !crashtest.Killed(err) {
		t.Fatalf("cairn run was not killed mid-call: %v\n%s", err, out.String())
	}
	code, stdout, errOut := cli(t, env, "resume", "k")
	if code != 0 || !strings.Contains(stdout, "three notes recorded") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, errOut)
	}
	count := map[string][]string{}
	for _, line := range callLines(t, calls) {
		note, key, _ := strings.Cut(line, "|")
		count[note] = append(count[note], key)
	}
	if len(count["first"]) != 1 || len(count["third"]) != 1 {
		t.Fatalf("calls %v: a completed call was made again", count)
	}
	if k := count["second"]; len(k) != 2 || k[0] != k[1] || !strings.HasSuffix(k[0], "/instructions/tool/1.0") {
		t.Fatalf("second call's keys %v: want the call in flight made again with the same key", k)
	}
	if !strings.HasSuffix(count["first"][0], "/instructions/tool/0.0") || !strings.HasSuffix(count["third"][0], "/instructions/tool/2.0") {
		t.Fatalf("keys %v", count)
	}
	stepsOnce(t, url, "k", "instructions")
}

// TestMCPSecretsNeverStored: the values an agent file's MCP servers read
// from the environment (a stdio server's env, an HTTP server's header)
// appear nowhere Cairn writes or shows — the SQLite file and its WAL, the
// trace, stdout and stderr — though a tool returned one and a tool error
// quoted it, and the journal recorded both.
func TestMCPSecretsNeverStored(t *testing.T) {
	dir := t.TempDir()
	bin := mcptest.Build(t, dir)
	const token, key = "tok-7Hq2Lx9Vw3Rp", "hdr-K8s5Mn2Zq7Tc"
	url := mcptest.StartHTTP(t, bin, []string{"MCPTEST_KEY=" + key})
	agentFile := mcpAgent(t, dir, `mcp_servers:
  - {name: local, command: ./mcptest-server, env: {TOKEN: "${MCP_TOKEN}"}}
  - {name: remote, url: "`+url+`", headers: {Authorization: "Bearer ${MCP_KEY}"}}
tools: [local.env, local.fail, remote.echo]
`, `replies:
  - tool_calls:
      - {name: local__env, args: {name: TOKEN}}
      - {name: local__fail, args: {message: "rejected `+token+`"}}
      - {name: remote__echo, args: {text: "`+key+`"}}
  - text: "the token is `+token+` and the key `+key+`"
`)
	db := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + db, "MCP_TOKEN": token, "MCP_KEY": key}
	var shown bytes.Buffer
	for _, args := range [][]string{
		{"run", agentFile, "--thread", "s", "--trace-dir", filepath.Join(dir, "trace"), "--log-level", "debug"},
		{"run", agentFile, "--json", "--stream-mode", "updates,messages,debug"},
		{"state", "s"}, {"history", "s", "--states", "--json"},
	} {
		code, out, errOut := cli(t, env, args...)
		shown.WriteString(out + errOut)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, shown.String())
		}
	}
	if !strings.Contains(shown.String(), "REDACTED") {
		t.Fatalf("nothing was redacted, so the test saw no secret:\n%s", shown.String())
	}
	haystacks := readTree(t, dir, filepath.Join(dir, "replies.yaml"), filepath.Join(dir, "mcptest-server"))
	haystacks["stdout and stderr"] = shown.Bytes()
	if len(haystacks[db])+len(haystacks[db+"-wal"]) == 0 {
		t.Fatal("no database to read")
	}
	noSecrets(t, haystacks, token, key)
}

// TestMCPInPipeline: a gate's agent file calls an MCP tool in its text
// step before its structured output; the call's key names the gate's
// namespace.
func TestMCPInPipeline(t *testing.T) {
	dir := t.TempDir()
	mcptest.Build(t, dir)
	files := map[string]string{
		"pipeline.yaml": "name: mcp-pipeline\nmetadata: {domain: example.org, feature: lookup}\ngates:\n  - {gate: 1, name: Lookup, agent: lookup.md, contract: contract.json, threshold: 50}\n",
		"contract.json": `{"type":"object","required":["count"]}`,
		"lookup.md": `---
name: lookup
model: {provider: scripted, script: replies.yaml}
mcp_servers:
  - {name: stock, command: ./mcptest-server, args: [-calls, calls.log]}
tools: [stock.record]
chain:
  - {id: look, kind: text}
  - {id: output, kind: structured, output_schema: Out}
schemas:
  Out: {type: object}
---
## step:look
Look the article up.
## step:output
Report the count.
`,
		"replies.yaml": `replies:
  - step: look
    tool_calls: [{name: stock__record, args: {note: A-17}}]
  - step: look
    text: "7 in stock"
  - step: output
    json: {count: 7}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, out, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", "p")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if got := callLines(t, filepath.Join(dir, "calls.log")); len(got) != 1 || !strings.HasPrefix(got[0], "A-17|p/gate1/") || !strings.HasSuffix(got[0], "/look/tool/0.0") {
		t.Fatalf("calls %v", got)
	}
	if code, out, _ := cli(t, env, "state", "p", "--ns", "gate1"); code != 0 || !strings.Contains(out, "7 in stock") {
		t.Fatalf("gate state: %d %s", code, out)
	}
}

// TestMCPExample runs examples/mcp as docs/mcp.md says, on a copy.
func TestMCPExample(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "mcp"))); err != nil {
		t.Fatal(err)
	}
	mcptest.Build(t, dir)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, out, errOut := cli(t, env, "run", filepath.Join(dir, "notes.md"))
	if code != 0 || !strings.Contains(out, "42 pages in all") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if got := callLines(t, filepath.Join(dir, "notes.log")); len(got) != 1 || !strings.HasPrefix(got[0], "chapter-1-and-2-read|notes-") {
		t.Fatalf("notes %v", got)
	}
}
