package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/model/scripted"
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

// oneLineDir writes oneLineAgent with its model's replies in a folder of
// assistants and returns the folder.
func oneLineDir(tb testing.TB, replies string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, content := range map[string]string{"oneline.md": oneLineAgent, "replies/r.yaml": replies} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// TestServeStreamsRedactedTokens runs an agent file (which always
// redacts) through cairn serve with stream_mode messages-tuple and
// messages: its one-line reply arrives in many chunks, spread over the
// model's pace, long before the run ends; the chunks join into the reply
// as stored; and the secrets in it, cut across the model's pieces, are in
// no byte of the stream, nor in the database's files.
func TestServeStreamsRedactedTokens(t *testing.T) {
	dir := oneLineDir(t, oneLineReply)
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

// firstTokens opens scripted models that note when each reply's first
// token leaves the model, on at.
type firstTokens struct{ at chan<- time.Time }

func (p firstTokens) Open(_ context.Context, c model.Config) (agent.Model, error) {
	read := c.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	b, err := read(c.Script)
	if err != nil {
		return nil, err
	}
	m, err := scripted.Parse(c.Script, b)
	if err != nil {
		return nil, err
	}
	return &timedModel{Model: m, at: p.at}, nil
}

func (firstTokens) KeyEnv() string { return "" }
func (firstTokens) ParseSpec(rest string) (model.Config, error) {
	return model.Config{Script: rest}, nil
}
func (firstTokens) FormatSpec(c model.Config) string { return c.Script }

type timedModel struct {
	*scripted.Model
	at chan<- time.Time
}

func (m *timedModel) GenerateStream(ctx context.Context, req agent.Request, onChunk func(agent.Chunk)) (agent.Response, error) {
	first := true
	return m.Model.GenerateStream(ctx, req, func(c agent.Chunk) {
		if first {
			first = false
			m.at <- time.Now()
		}
		onChunk(c)
	})
}

// pacedReply is a one-line reply whose first token leaves the model 1 ms
// after the call, the others 1 ms apart.
const pacedReply = `replies:
  - text: "Hello! Here is the answer you asked for, in one line, and nothing in it is a secret."
    chunk_delay_ms: 1
`

// serveInProcess runs the cairn serve command in this process with the
// given model registry and returns its URL.
func serveInProcess(b *testing.B, assistants string, models *model.Registry) string {
	pr, pw := io.Pipe()
	a := &app{stdout: io.Discard, stderr: pw, getenv: os.Getenv, storeURL: "sqlite:" + filepath.Join(b.TempDir(), "b.db"), logLevel: "warn", logFormat: "text", models: models}
	if err := a.setLogger(); err != nil {
		b.Fatal(err)
	}
	cmd := a.serveCmd()
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--assistants", assistants})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	b.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr) //nolint:errcheck // the rest of the server's stderr
	_, rest, ok := strings.Cut(line, "cairn: serving ")
	if err != nil || !ok {
		b.Fatalf("cairn serve did not start: %q %v", line, err)
	}
	url, _, _ := strings.Cut(rest, " ")
	return url
}

// firstChunk streams a stateless run of assistant in messages-tuple mode
// and returns when its first text chunk arrived, reading the stream to
// its end.
func firstChunk(b *testing.B, url, assistant string) time.Time {
	body, _ := json.Marshal(map[string]any{"assistant_id": assistant, "input": "go", "stream_mode": []string{"messages-tuple"}})
	res, err := http.Post(url+"/runs/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	var got time.Time
	event := ""
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		now := time.Now()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = strings.TrimSpace(e)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && event == "messages" && got.IsZero() {
			var tuple []struct {
				Content string `json:"content"`
			}
			if json.Unmarshal([]byte(data), &tuple) == nil && len(tuple) > 0 && tuple[0].Content != "" {
				got = now
			}
		}
	}
	if got.IsZero() {
		b.Fatal("no messages chunk came")
	}
	return got
}

// BenchmarkServeFirstChunk measures, through cairn serve in
// messages-tuple mode, the time from the moment an agent file's model
// hands over its reply's first token to the moment a client reads it as
// a messages chunk (first-chunk-µs; the run redacts, as agent files
// always do, and the token opens no secret shape). ns/op is a whole run.
func BenchmarkServeFirstChunk(b *testing.B) {
	dir := oneLineDir(b, pacedReply)
	at := make(chan time.Time, 1)
	reg := model.NewRegistry()
	reg.Register("scripted", firstTokens{at: at})
	url := serveInProcess(b, dir, reg)
	var gaps []time.Duration
	for b.Loop() {
		arrived := firstChunk(b, url, "oneline")
		gaps = append(gaps, arrived.Sub(<-at))
	}
	slices.Sort(gaps)
	q := func(f float64) float64 { return float64(gaps[int(f*float64(len(gaps)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.5), "first-chunk-µs-p50")
	b.ReportMetric(q(0.9), "first-chunk-µs-p90")
	b.ReportMetric(q(0.99), "first-chunk-µs-p99")
	b.ReportMetric(q(1), "first-chunk-µs-max")
}
