package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/pgtest"
)

// child is a cairn process started by a test: what it writes on stderr
// is kept; stop (at the latest at cleanup) ends it.
type child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{} // closed when its stderr is read to the end
	once sync.Once
}

// startChild starts cmd and waits until it writes a line holding ready,
// which it returns.
func startChild(t *testing.T, cmd *exec.Cmd, ready string) (*child, string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { c.stop(syscall.SIGTERM) })
	readyLine := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.mu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if strings.Contains(sc.Text(), ready) {
				select {
				case readyLine <- sc.Text():
				default:
				}
			}
		}
		close(readyLine)
	}()
	line, ok := <-readyLine
	if !ok {
		c.stop(syscall.SIGTERM)
		t.Fatalf("%v did not start:\n%s", cmd.Args, c.logText())
	}
	return c, line
}

func (c *child) logText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// stop sends the process sig (after SIGCONT, should it be stopped), reads
// what it still writes and waits for it, once.
func (c *child) stop(sig os.Signal) {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Signal(sig)
		<-c.done
		_ = c.cmd.Wait()
	})
}

// serveProcess is a cairn serve process started by a test.
type serveProcess struct {
	*child
	url string
}

// startServe starts cairn serve with args on a free port and waits until
// it listens.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	return startServeCmd(t, cairnProcess(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...))
}

// startServeCmd starts a cairn serve command and waits until it listens.
func startServeCmd(t *testing.T, cmd *exec.Cmd) *serveProcess {
	t.Helper()
	c, line := startChild(t, cmd, "cairn: serving ")
	_, rest, _ := strings.Cut(line, "cairn: serving ")
	url, _, _ := strings.Cut(rest, " ")
	return &serveProcess{child: c, url: url}
}

// callClient bounds a test's call: a run that never ends fails its test
// in minutes, with the server's log, rather than the whole package at
// its timeout.
var callClient = &http.Client{Timeout: 3 * time.Minute}

// call sends a JSON request and decodes the JSON answer into out.
func (p *serveProcess) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := callClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\nthe server's log ends:\n%s", method, path, err, lastLines(p.logText(), 40))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v\nthe server's log ends:\n%s", method, path, err, lastLines(p.logText(), 40))
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return res.StatusCode
}

// needTool returns a tool's path; CI must have it, elsewhere its absence
// skips the test.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not found", name)
	}
	return p
}

// TestLangGraphSDK runs server/sdktest, a suite written with the official
// LangGraph JS SDK (@langchain/langgraph-sdk, installed by npm ci from the
// committed lockfile), against a real cairn serve: on SQLite, and on
// PostgreSQL when CAIRN_TEST_POSTGRES names a server (CI sets it).
func TestLangGraphSDK(t *testing.T) { sdkSuiteOnStores(t, "sdk.test.mjs") }

// sdkSuiteOnStores runs a suite of server/sdktest against a real cairn
// serve of examples/serve: on SQLite, and on PostgreSQL when
// CAIRN_TEST_POSTGRES names a server.
func sdkSuiteOnStores(t *testing.T, suites ...string) {
	node, dir := sdkSuite(t)
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "serve.db") },
		"postgres": func(t *testing.T) string {
			dsn, _ := pgtest.Schema(t, "cairn_sdk")
			return dsn
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", stores[name](t), "--webhook-private") // sdk.test.mjs's webhook receiver is on loopback
			runNode(t, node, dir, []string{"CAIRN_URL=" + p.url}, append([]string{"--test"}, suites...)...)
		})
	}
}

// TestLangGraphSDKTenants runs server/sdktest/tenants.test.mjs: two
// tenants' clients of the official SDK use the same thread ids against a
// real cairn serve --auth keys, each on a thread of its own.
func TestLangGraphSDKTenants(t *testing.T) {
	node, dir := sdkSuite(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "serve.db")
	keyA, keyB := tenantKey(t, db, "tenant-a"), tenantKey(t, db, "tenant-b")
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", db, "--auth", "keys")
	runNode(t, node, dir, []string{"CAIRN_URL=" + p.url, "CAIRN_KEY_A=" + keyA, "CAIRN_KEY_B=" + keyB}, "--test", "tenants.test.mjs")
}

// sdkSuite returns node and the folder of server/sdktest, its packages
// installed (npm ci, from the committed lockfile) if they are not yet.
func sdkSuite(t *testing.T) (node, dir string) {
	t.Helper()
	return nodeSuite(t, filepath.Join("server", "sdktest"), "@langchain", "langgraph") // the last package added: an older install runs npm ci again
}

// nodeSuite returns node and the folder rel (from the repository's root)
// of a node suite, its packages installed (npm ci, from the committed
// lockfile) unless node_modules already holds the package named by pkg.
func nodeSuite(t *testing.T, rel string, pkg ...string) (node, dir string) {
	t.Helper()
	node, npm := needTool(t, "node"), needTool(t, "npm")
	dir, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(append(append([]string{dir, "node_modules"}, pkg...), "package.json")...)
	if _, err := os.Stat(marker); err != nil {
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", rel, err, out)
		}
	}
	return node, dir
}

// chromiumPath is the browser the browser suites drive: CAIRN_CHROMIUM,
// or Debian's chromium.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAIRN_CHROMIUM"); p != "" {
		return p
	}
	return needTool(t, "chromium")
}

// runNode runs node with args in a suite's folder, with env added to this
// process's environment, and fails the test with its output unless it
// passes within nodeLimit (a suite a failure left hanging on an open
// stream is killed, its output shown); it logs the output's last lines.
func runNode(t *testing.T, node, dir string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s in %s failed: %v\n%s", strings.Join(args, " "), filepath.Base(dir), err, out)
	}
	t.Logf("%s", lastLines(string(out), 8))
}

// nodeLimit bounds one run of a node suite.
const nodeLimit = 4 * time.Minute

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestServeRestartPicksUpRuns kills a server with SIGKILL in the middle of
// a background run; the next server on the store finishes it from its
// last checkpoint: no committed step runs again, and the run's stream can
// be joined from its start.
func TestServeRestartPicksUpRuns(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "serve.db")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--assistants", assistants, "--store", db)
	var th, run map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := p.call(t, "POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "slow-steps", "input": "count", "stream_mode": []string{"updates"}}, &run); code != 200 {
		t.Fatalf("create run: %d %v", code, run)
	}
	rid := run["run_id"].(string)
	crashtest.WaitFor(t, 10*time.Second, "the first step's checkpoint", func() bool {
		var h []map[string]any
		p.call(t, "POST", "/threads/"+tid+"/history", map[string]any{"limit": 10}, &h)
		return len(h) >= 3 // the input view, the input, the first step
	})
	p.stop(syscall.SIGKILL)

	q := startServe(t, "--assistants", assistants, "--store", db)
	var final map[string]any
	if code := q.call(t, "GET", "/threads/"+tid+"/runs/"+rid+"/join", nil, &final); code != 200 || final["final_output"] != "three" {
		t.Fatalf("join after restart: %d %v", code, final)
	}
	var got map[string]any
	q.call(t, "GET", "/threads/"+tid+"/runs/"+rid, nil, &got)
	if got["status"] != "success" {
		t.Fatalf("run after restart: %v", got)
	}
	var h []struct {
		Metadata struct {
			Cairn struct {
				Nodes []string `json:"nodes"`
			} `json:"cairn"`
		} `json:"metadata"`
	}
	q.call(t, "POST", "/threads/"+tid+"/history", map[string]any{"limit": 100}, &h)
	ran := map[string]int{}
	for _, cp := range h {
		for _, n := range cp.Metadata.Cairn.Nodes {
			ran[n]++
		}
	}
	for _, step := range []string{"one", "two", "three"} {
		if ran[step] != 1 {
			t.Errorf("step %s committed %d times (history %v)", step, ran[step], ran)
		}
	}
	// The whole stream, from the store: two attempts, no update twice.
	res, err := http.Get(q.url + "/threads/" + tid + "/runs/" + rid + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if n := strings.Count(string(body), "event: metadata"); n != 2 {
		t.Errorf("%d metadata events, want one per attempt:\n%s", n, body)
	}
	for _, step := range []string{"one", "two", "three"} {
		if n := strings.Count(string(body), `data: {"`+step+`":`); n > 1 {
			t.Errorf("update of %s streamed %d times:\n%s", step, n, body)
		}
	}
	if !strings.Contains(string(body), `data: {"three":`) {
		t.Errorf("the last step's update is missing:\n%s", body)
	}
}

// TestUI drives the web UI in a real Chromium (Debian's chromium, through
// playwright-core from server/uitest's committed lockfile) against a real
// cairn serve on SQLite.
func TestUI(t *testing.T) {
	node, dir := nodeSuite(t, filepath.Join("server", "uitest"), "playwright-core")
	chromium := chromiumPath(t)
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "ui.db"))
	runNode(t, node, dir, []string{"CAIRN_URL=" + p.url, "CAIRN_CHROMIUM=" + chromium, "CAIRN_SCREENSHOTS=" + t.TempDir()}, "--test", "--test-concurrency=1", "ui.test.mjs")
}

// TestServeSecrets runs the leaky agent file through cairn serve — a run
// that fails with an error quoting secrets, then one whose model replies
// with them — and reads every answer in every stream mode, the history,
// the runs, the server's log and the database's bytes: no secret appears.
func TestServeSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("leaky.md", strings.Replace(leakyAgent, "script: r.yaml", "script: replies/r.yaml", 1))
	write("replies/r.yaml", leakyFailing)
	db := filepath.Join(t.TempDir(), "serve.db")
	cmd := cairnProcess(t, []string{"OPENAI_API_KEY=plainkeyvalue-0042"}, "serve", "--addr", "127.0.0.1:0", "--assistants", dir, "--store", "sqlite://"+db, "--log-level", "debug")
	p := startServeCmd(t, cmd)
	var shown bytes.Buffer
	get := func(method, path string, body any) {
		var out json.RawMessage
		p.call(t, method, path, body, &out)
		shown.Write(out)
	}
	streamAll := func(path string, body any) {
		b, _ := json.Marshal(body)
		res, err := http.Post(p.url+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(res.Body)
		res.Body.Close()
		shown.Write(all)
	}
	get("POST", "/threads", map[string]any{"thread_id": "s"})
	modes := []string{"values", "updates", "messages", "messages-tuple", "checkpoints", "tasks", "debug"}
	streamAll("/threads/s/runs/stream", map[string]any{"assistant_id": "leaky", "input": "token=tok-abcdefgh1234", "stream_mode": modes})
	write("replies/r.yaml", leakyReplies)
	streamAll("/threads/s/runs/stream", map[string]any{"assistant_id": "leaky", "stream_mode": modes})
	streamAll("/runs/stream", map[string]any{"assistant_id": "leaky", "input": "password=hunter2hunter2", "stream_mode": modes, "on_completion": "keep"})
	for _, path := range []string{"/threads/s", "/threads/s/state", "/threads/s/history", "/threads/s/runs"} {
		get("GET", path, nil)
	}
	get("POST", "/threads/search", map[string]any{})
	var runs []struct {
		RunID string `json:"run_id"`
	}
	p.call(t, "GET", "/threads/s/runs", nil, &runs)
	for _, r := range runs {
		res, err := http.Get(p.url + "/threads/s/runs/" + r.RunID + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(res.Body)
		res.Body.Close()
		shown.Write(all)
	}
	if !strings.Contains(shown.String(), "[REDACTED]") || len(runs) != 2 {
		t.Fatalf("the test saw no secret (or %d runs):\n%s", len(runs), shown.String())
	}
	haystacks := map[string][]byte{"the API's answers": shown.Bytes()}
	p.stop(syscall.SIGTERM)
	haystacks["the server's log"] = []byte(p.logText())
	for _, f := range []string{db, db + "-wal", filepath.Join(dir, "out", "leaky.json")} {
		if b, err := os.ReadFile(f); err == nil {
			haystacks[f] = b
		}
	}
	for name, b := range haystacks {
		for _, secret := range append(leaked, "tok-abcdefgh1234") {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret %q", name, secret)
			}
		}
	}
}

// TestRunsCommand lists the runs a server keeps, filters them, shows one
// with its event count, and refuses bad flags.
func TestRunsCommand(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "serve.db")
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", db)
	p.call(t, "POST", "/threads", map[string]any{"thread_id": "r1"}, nil)
	var out map[string]any
	p.call(t, "POST", "/threads/r1/runs/wait", map[string]any{"assistant_id": "approval", "input": "hi"}, &out)
	p.call(t, "POST", "/threads/r1/runs/wait", map[string]any{"assistant_id": "approval", "command": map[string]any{"resume": true}}, &out)
	code, stdout, stderr := cli(t, nil, "runs", "--store", db, "--json")
	var runs []runView
	if code != 0 || json.Unmarshal([]byte(stdout), &runs) != nil || len(runs) != 2 || runs[0].Status != "success" || runs[1].Status != "interrupted" || runs[0].AssistantID != "approval" {
		t.Fatalf("runs: %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, nil, "runs", "--store", db, "--status", "interrupted")
	if code != 0 || strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, runs[1].RunID) {
		t.Fatalf("runs --status interrupted: %d\n%s", code, stdout)
	}
	code, stdout, _ = cli(t, nil, "runs", runs[0].RunID, "--store", db, "--json")
	var one runView
	if code != 0 || json.Unmarshal([]byte(stdout), &one) != nil || one.Events == nil || *one.Events < 2 {
		t.Fatalf("runs RUN: %d %s", code, stdout)
	}
	for _, args := range [][]string{{"runs", "--status", "done"}, {"runs", "--limit", "-1"}, {"runs", "a", "b"}} {
		if code, _, _ := cli(t, nil, append(args, "--store", db)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, stderr := cli(t, nil, "runs", "no-such-run", "--store", db); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("a missing run: exit %d %s", code, stderr)
	}
}

// TestKeysCommand: a key is printed once, listed without its secret, and
// revoked; a missing tenant is a usage error.
func TestKeysCommand(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "keys.db")
	code, stdout, stderr := cli(t, nil, "keys", "create", "--tenant", "acme", "--name", "ci", "--store", db, "--json")
	var k struct{ ID, Tenant, Key string }
	if code != 0 || json.Unmarshal([]byte(stdout), &k) != nil || k.Tenant != "acme" || !strings.HasPrefix(k.Key, "cairn_"+k.ID+"_") {
		t.Fatalf("create: %d %s %s", code, stdout, stderr)
	}
	secret := strings.TrimPrefix(k.Key, "cairn_"+k.ID+"_")
	if code, out, _ := cli(t, nil, "keys", "list", "--store", db); code != 0 || !strings.Contains(out, k.ID) || strings.Contains(out, secret) {
		t.Fatalf("list: %d %s", code, out)
	}
	for _, f := range []string{strings.TrimPrefix(db, "sqlite:"), strings.TrimPrefix(db, "sqlite:") + "-wal"} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the key's secret", f)
		}
	}
	if code, _, _ := cli(t, nil, "keys", "revoke", k.ID, "--store", db); code != 0 {
		t.Fatalf("revoke: exit %d", code)
	}
	if code, out, _ := cli(t, nil, "keys", "list", "--store", db, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after revoke: %d %s", code, out)
	}
	if code, _, _ := cli(t, nil, "keys", "create", "--store", db); code != 2 {
		t.Fatalf("create without a tenant: exit %d", code)
	}
}
