package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// TestLangGraphSaver builds the LangGraph JS checkpointer
// (clients/langgraph-js: npm ci from its committed lockfile, tsc) and runs
// its suites against a real cairn serve on SQLite and on PostgreSQL:
// LangGraph's own conformance suite for checkpointers
// (@langchain/langgraph-checkpoint-validation) and real graphs. On SQLite,
// a W1 thread the saver wrote is then read and forked with the CLI.
func TestLangGraphSaver(t *testing.T) {
	node, dir := nodeSuite(t, filepath.Join("clients", "langgraph-js"), "@langchain", "langgraph-checkpoint-validation")
	build := exec.Command(node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "serve.db") },
		"postgres": func(t *testing.T) string {
			dsn, _ := pgtest.Schema(t, "cairn_lgsaver")
			return dsn
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			db := stores[name](t)
			args := []string{"--assistants", "none", "--store", db} // a server for the checkpointer only
			env := []string{"NO_COLOR=1"}
			if name == "postgres" { // with assistants, and API keys: every thread in the key's tenant
				key := tenantKey(t, db, "langgraph-app")
				args = []string{"--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", db, "--auth", "keys"}
				env = append(env, "CAIRN_API_KEY="+key)
			}
			p := startServe(t, args...)
			cmd := exec.Command(node, filepath.Join("node_modules", "vitest", "vitest.mjs"), "run")
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), env...), "CAIRN_URL="+p.url)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the saver's suites failed: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), " passed") || strings.Contains(string(out), " failed") {
				t.Fatalf("the saver's suites did not pass:\n%s", lastLines(string(out), 30))
			}
			t.Logf("%s", lastLines(string(out), 5))
			if name == "sqlite" {
				checkSaverThreadCLI(t, node, dir, p.url, db)
			}
		})
	}
}

// tenantKey makes an API key of a tenant with cairn keys create.
func tenantKey(t *testing.T, store, tenant string) string {
	t.Helper()
	code, out, errOut := cli(t, nil, "keys", "create", "--tenant", tenant, "--json", "--store", store)
	var k struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil || k.Key == "" {
		t.Fatalf("cairn keys create: %d %v %s", code, err, errOut)
	}
	return k.Key
}

// checkSaverThreadCLI writes a W1 thread with the saver and reads it with
// cairn history and cairn state, then forks it with cairn fork: the state
// Cairn shows is the graph's, in plain JSON.
func checkSaverThreadCLI(t *testing.T, node, dir, url, db string) {
	t.Helper()
	w1 := exec.Command(node, filepath.Join("bench", "w1.mjs"), "--saver", "cairn", "--url", url, "--steps", "12", "--thread", "cli-w1")
	w1.Dir = dir
	out, err := w1.Output()
	if err != nil {
		t.Fatalf("bench/w1.mjs: %v\n%s", err, out)
	}
	store := strings.Replace(db, "sqlite://", "sqlite:", 1)
	code, hist, errOut := cli(t, nil, "history", "cli-w1", "--json", "--store", store)
	if code != 0 {
		t.Fatalf("cairn history: %d %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(hist), &rows); err != nil || len(rows) != 14 {
		t.Fatalf("cairn history: %d rows, %v\n%s", len(rows), err, hist)
	}
	code, st, errOut := cli(t, nil, "state", "cli-w1", "--json", "--store", store)
	if code != 0 {
		t.Fatalf("cairn state: %d %s", code, errOut)
	}
	var head struct {
		State struct {
			Count    int              `json:"count"`
			Last     string           `json:"last"`
			Messages []map[string]any `json:"messages"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(st), &head); err != nil || head.State.Count != 12 || len(head.State.Messages) != 12 || !strings.HasPrefix(head.State.Last, "tcli-w1-step-12-") {
		t.Fatalf("cairn state: %v\n%s", err, st)
	}
	if !strings.Contains(st, "tcli-w1-step-3-") {
		t.Errorf("the messages are not readable in cairn state:\n%s", st)
	}
	seq := int(rows[5]["seq"].(float64))
	code, _, errOut = cli(t, nil, "fork", "cli-w1", "--at", strconv.Itoa(seq), "--into", "cli-w1-fork", "--set", `last="forked"`, "--store", store)
	if code != 0 {
		t.Fatalf("cairn fork: %d %s", code, errOut)
	}
	code, st, errOut = cli(t, nil, "state", "cli-w1-fork", "--json", "--store", store)
	var fork struct {
		State struct {
			Count int    `json:"count"`
			Last  string `json:"last"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(st), &fork); code != 0 || err != nil || fork.State.Last != "forked" || fork.State.Count != int(seq)-2 {
		t.Fatalf("cairn state of the fork: %d %s %v\n%s", code, errOut, err, st)
	}
}
