package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestUseStream drives a chat page written on the official useStream hook
// (clients/usestream: React and @langchain/langgraph-sdk/react bundled by
// esbuild, from the committed lockfile) in Chromium. The page is served
// from its own origin and calls cairn serve directly, as a front end's
// documented set-up does (CORS, preflights), on a chat assistant declared
// in a file (testdata/usestream/chat.md). Each scenario gets a fresh
// server: send and watch the reply stream in, stop it, reload mid-run and
// see the reply complete, answer an interrupt.
func TestUseStream(t *testing.T) {
	node, npm := needTool(t, "node"), needTool(t, "npm")
	chromium := os.Getenv("CAIRN_CHROMIUM")
	if chromium == "" {
		chromium = needTool(t, "chromium")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "usestream"))
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
	build := exec.Command(node, "build.mjs")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the page: %v\n%s", err, out)
	}
	for _, scenario := range useStreamScenarios {
		t.Run(scenario, func(t *testing.T) {
			p := startServe(t, "--assistants", filepath.Join("testdata", "usestream"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "chat.db"))
			cmd := exec.Command(node, "--test", "usestream.test.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CAIRN_URL="+p.url, "CAIRN_CHROMIUM="+chromium, "CAIRN_SCENARIO="+scenario)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the useStream page failed: %v\n%s", err, out)
			}
			t.Logf("%s", lastLines(string(out), 4))
		})
	}
}

// useStreamScenarios are the browser scenarios TestUseStream runs.
var useStreamScenarios = []string{"send", "stop", "reload", "approve"}
