package main

import (
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
	node, dir := nodeSuite(t, filepath.Join("clients", "usestream"), "@langchain", "langgraph-sdk")
	chromium := chromiumPath(t)
	runNode(t, node, dir, nil, "build.mjs") // the page, bundled into dist/
	for _, scenario := range []string{"send", "stop", "reload", "approve"} {
		t.Run(scenario, func(t *testing.T) {
			p := startServe(t, "--assistants", filepath.Join("testdata", "usestream"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "chat.db"))
			runNode(t, node, dir, []string{"CAIRN_URL=" + p.url, "CAIRN_CHROMIUM=" + chromium, "CAIRN_SCENARIO=" + scenario}, "--test", "usestream.test.mjs")
		})
	}
}
