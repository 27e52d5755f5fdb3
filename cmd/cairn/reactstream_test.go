package main

import (
	"path/filepath"
	"testing"
)

// TestReactStream drives a chat page written on the newest official
// front-end hook, useStream from @langchain/react (clients/reactstream,
// bundled by esbuild from the committed lockfile), in Chromium. The hook
// speaks LangGraph's thread-centric protocol: commands to
// /threads/{id}/commands and the thread's events from
// /threads/{id}/stream/events, over SSE or a WebSocket. The page is served
// from its own origin against cairn serve, on a chat assistant declared in
// a file (testdata/usestream/chat.md). Each scenario gets a fresh server:
// two turns with their tokens streaming in, an interrupt met live and
// answered with respond(), a reload mid-run that resumes the stream, and
// the two turns again over a WebSocket.
func TestReactStream(t *testing.T) {
	node, dir := nodeSuite(t, filepath.Join("clients", "reactstream"), "@langchain", "react")
	chromium := chromiumPath(t)
	runNode(t, node, dir, nil, "build.mjs") // the page, bundled into dist/
	for _, scenario := range []string{"turns", "approve", "reload", "websocket"} {
		t.Run(scenario, func(t *testing.T) {
			p := startServe(t, "--assistants", filepath.Join("testdata", "usestream"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "chat.db"))
			runNode(t, node, dir, []string{"CAIRN_URL=" + p.url, "CAIRN_CHROMIUM=" + chromium, "CAIRN_SCENARIO=" + scenario}, "--test", "reactstream.test.mjs")
		})
	}
}
