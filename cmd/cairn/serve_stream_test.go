package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oneLineAgent answers one line, three characters at a time, 25 ms
// apart; the line holds secrets of three kinds, each cut across pieces.
const oneLineAgent = `---
name: oneline
model: {provider: scripted, script: replies/r.yaml}
chain:
  - {id: answer, kind: text}
secrets:
  patterns: ["CUSTOM-[0-9]{6}"]
---
## step:answer
Answer in one line.
`

const oneLineReply = `replies:
  - text: "Sure. Your key is sk-abcdefghijklmnopqrstuvwx, the env key plainkeyvalue-0042 and the code CUSTOM-123456, all set."
    chunk_chars: 3
    chunk_delay_ms: 25
`

// TestServeStreamsRedactedTokens runs an agent file (which always
// redacts) through cairn serve with stream_mode messages-tuple and
// messages: its one-line reply arrives in many chunks, spread over the
// model's pace, long before the run ends; the chunks join into the reply
// as stored; and the secrets in it, cut across the model's pieces, are in
// no byte of the stream, nor in the database's files.
func TestServeStreamsRedactedTokens(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"oneline.md": oneLineAgent, "replies/r.yaml": oneLineReply} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(t.TempDir(), "serve.db")
	p := startServeCmd(t, cairnProcess(t, []string{"OPENAI_API_KEY=plainkeyvalue-0042"}, "serve", "--addr", "127.0.0.1:0", "--assistants", dir, "--store", "sqlite://"+db))
	p.call(t, "POST", "/threads", map[string]any{"thread_id": "s"}, nil)
	body, _ := json.Marshal(map[string]any{"assistant_id": "oneline", "input": "go", "stream_mode": []string{"messages-tuple", "messages", "values"}})
	res, err := http.Post(p.url+"/threads/s/runs/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, &raw), res.Body}
	var arrived []time.Time // of each event
	events := readSSE(t, res, func([]sseEvent) bool { arrived = append(arrived, time.Now()); return false })
	end := time.Now()
	var chunks []string
	var times []time.Time
	partial := ""
	for i, ev := range events {
		switch ev.event {
		case "messages":
			var tuple []struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal([]byte(ev.data), &tuple); err != nil || len(tuple) != 2 {
				t.Fatalf("messages event %s: %v", ev.data, err)
			}
			if tuple[0].Content != "" {
				chunks, times = append(chunks, tuple[0].Content), append(times, arrived[i])
			}
		case "messages/partial":
			var msgs []struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal([]byte(ev.data), &msgs); err != nil || len(msgs) != 1 {
				t.Fatalf("messages/partial event %s: %v", ev.data, err)
			}
			partial = msgs[0].Content
		}
	}
	want := "Sure. Your key is [REDACTED], the env key [REDACTED] and the code [REDACTED], all set."
	if got := strings.Join(chunks, ""); got != want || partial != want {
		t.Fatalf("chunks %q join into %q, messages/partial %q; want %q", chunks, got, partial, want)
	}
	if len(chunks) < 10 || times[len(times)-1].Sub(times[0]) < 500*time.Millisecond || end.Sub(times[0]) < 500*time.Millisecond {
		t.Fatalf("%d chunks from %s to %s, the stream ended at %s: not streamed", len(chunks), times[0].Format(time.StampMicro), times[len(times)-1].Format(time.StampMicro), end.Format(time.StampMicro))
	}
	var state struct {
		Values struct {
			Steps map[string]string `json:"steps"`
		} `json:"values"`
	}
	p.call(t, "GET", "/threads/s/state", nil, &state)
	if state.Values.Steps["answer"] != want {
		t.Fatalf("stored answer %q, want %q", state.Values.Steps["answer"], want)
	}
	p.stop(syscall.SIGTERM)
	haystacks := map[string][]byte{"the stream": raw.Bytes()}
	for _, f := range []string{db, db + "-wal"} {
		if b, err := os.ReadFile(f); err == nil {
			haystacks[f] = b
		}
	}
	for name, b := range haystacks {
		for _, secret := range []string{"abcdefghijklmnopqrstuvwx", "plainkeyvalue-0042", "CUSTOM-123456", "123456"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret %q", name, secret)
			}
		}
	}
}
