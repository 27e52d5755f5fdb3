package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
)

// serveProcess is a cairn serve process started by a test.
type serveProcess struct {
	cmd *exec.Cmd
	url string
	log *bytes.Buffer
}

// startServe starts cairn serve with args on a free port and waits until
// it listens.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	cmd := cairnProcess(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, log: &bytes.Buffer{}}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		line := lines.Text()
		p.log.WriteString(line + "\n")
		if rest, ok := strings.CutPrefix(line, "cairn: serving "); ok {
			p.url, _, _ = strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return p
		}
	}
	_ = cmd.Wait()
	t.Fatalf("cairn serve did not start:\n%s", p.log)
	return nil
}

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
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
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
// committed lockfile), against a real cairn serve on SQLite.
func TestLangGraphSDK(t *testing.T) {
	node, npm := needTool(t, "node"), needTool(t, "npm")
	dir, err := filepath.Abs(filepath.Join("..", "..", "server", "sdktest"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk", "package.json")); err != nil {
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "serve.db"))
	cmd := exec.Command(node, "--test", "sdk.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CAIRN_URL="+p.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK suite failed: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(string(out), 8))
}

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
		return len(h) >= 2
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

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
	node, npm := needTool(t, "node"), needTool(t, "npm")
	chromium := os.Getenv("CAIRN_CHROMIUM")
	if chromium == "" {
		chromium = needTool(t, "chromium")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "server", "uitest"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "ui.db"))
	cmd := exec.Command(node, "--test", "--test-concurrency=1", "ui.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CAIRN_URL="+p.url, "CAIRN_CHROMIUM="+chromium, "CAIRN_SCREENSHOTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the UI suite failed: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(string(out), 8))
}
