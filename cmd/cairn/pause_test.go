package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// TestLangGraphSDKPause runs server/sdktest/pause.test.mjs, LangGraph's
// semantics at a pause through the official SDK, against a real cairn
// serve of examples/serve: on SQLite, and on PostgreSQL when
// CAIRN_TEST_POSTGRES names a server. A person's updateState at the
// approval agent's pause (no asNode) is written as draft, and a run with
// no input sends the edited draft without calling the model for draft
// again nor pausing again.
func TestLangGraphSDKPause(t *testing.T) {
	node, dir := sdkSuite(t)
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "serve.db") },
		"postgres": func(t *testing.T) string {
			dsn, _ := pgtest.Schema(t, "cairn_sdk_pause")
			return dsn
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", stores[name](t))
			cmd := exec.Command(node, "--test", "pause.test.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CAIRN_URL="+p.url)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the SDK pause suite failed: %v\n%s", err, out)
			}
			t.Logf("%s", lastLines(string(out), 8))
		})
	}
}
