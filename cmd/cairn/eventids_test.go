package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// sseEvent is one event of a stream as a client reads it.
type sseEvent struct{ id, event, data string }

// readSSE reads a stream's events until it ends, or until stop says so.
func readSSE(t *testing.T, res *http.Response, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	defer res.Body.Close()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
				if stop != nil && stop(out) {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// streamFrom opens a run's stream after event lastID ("" from the start).
func streamFrom(t *testing.T, ctx context.Context, url, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	return res
}

// chattyAgent writes an agent file whose three steps stream thirty lines
// each, a line every 8 ms: a run sends about a hundred events.
func chattyAgent(t *testing.T) string {
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d of the answer", i))
	}
	text := strings.Join(lines, `\n`)
	var replies, chain strings.Builder
	for _, step := range []string{"one", "two", "three"} {
		fmt.Fprintf(&replies, "  - {step: %s, text: \"%s\", chunk_delay_ms: 8}\n", step, text)
		fmt.Fprintf(&chain, "  - {id: %s, kind: text, prompt_section: \"step:%s\"}\n", step, step)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("replies/chatty.yaml", "replies:\n"+replies.String())
	write("chatty.md", "---\nname: chatty\nmodel:\n  provider: scripted\n  script: replies/chatty.yaml\nchain:\n"+chain.String()+
		"---\n\n## step:one\n\nOne.\n\n## step:two\n\nTwo.\n\n## step:three\n\nThree.\n")
	return dir
}

// TestServeKillEventIDs kills a server with SIGKILL right after its
// client read an event (the server stores events in 20 ms batches, so
// the last ones it sent are lost with it), restarts it on the same store,
// and reconnects with the last event id the client had: an id never
// names two different events, and the client receives every event the
// store holds after the last one it shares with the store — none of the
// new attempt's events is skipped for having the seq of a lost one.
func TestServeKillEventIDs(t *testing.T) {
	assistants := chattyAgent(t)
	lost := 0
	for round := range 3 {
		lost += killAndRejoin(t, assistants, round)
	}
	if lost == 0 {
		t.Fatal("no kill lost an event the client had read: the test did not exercise the lost-event case")
	}
	t.Logf("events read by the client and lost with the server: %d in 3 kills", lost)
}

// killAndRejoin does one kill and rejoin, checks what the client read,
// and returns how many events it read that the store lost.
func killAndRejoin(t *testing.T, assistants string, round int) int {
	db := "sqlite://" + filepath.Join(t.TempDir(), "kill.db")
	p := startServe(t, "--assistants", assistants, "--store", db)
	var th, run map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := p.call(t, "POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "chatty", "input": "go",
		"stream_mode": []string{"messages-tuple", "updates", "values"}}, &run); code != 200 {
		t.Fatalf("create run: %d %v", code, run)
	}
	path := "/threads/" + tid + "/runs/" + run["run_id"].(string) + "/stream"
	at := 10 + rand.IntN(60) + 20*round
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := readSSE(t, streamFrom(t, ctx, p.url+path, ""), func(evs []sseEvent) bool {
		if len(evs) < at {
			return false
		}
		p.stop(syscall.SIGKILL) // at once: the event just read is not stored yet
		return true
	})
	cancel()
	last := before[len(before)-1].id
	q := startServe(t, "--assistants", assistants, "--store", db)
	after := readSSE(t, streamFrom(t, context.Background(), q.url+path, last), nil)
	whole := readSSE(t, streamFrom(t, context.Background(), q.url+path, ""), nil)
	return checkRejoin(t, before, after, whole)
}

// checkRejoin checks a client's events before a kill and after its
// reconnection against the whole stored log; it returns how many events
// the client read that the log does not hold.
func checkRejoin(t *testing.T, before, after, whole []sseEvent) int {
	t.Helper()
	stored := map[string]sseEvent{}
	for _, ev := range whole {
		if _, dup := stored[ev.id]; dup {
			t.Fatalf("id %s twice in the stored log", ev.id)
		}
		stored[ev.id] = ev
	}
	lost, shared := 0, -1
	for _, ev := range before {
		got, ok := stored[ev.id]
		switch {
		case !ok:
			lost++
		case got != ev:
			t.Fatalf("id %s named %v before the kill and %v in the stored log", ev.id, ev, got)
		}
	}
	for i, ev := range whole {
		for _, b := range before {
			if b.id == ev.id {
				shared = i
			}
		}
	}
	want := whole[shared+1:]
	if fmt.Sprint(after) != fmt.Sprint(want) {
		t.Fatalf("after reconnecting with %s the client read %d events, want the %d the store holds after %s:\n got %v\nwant %v",
			before[len(before)-1].id, len(after), len(want), whole[max(shared, 0)].id, ids(after), ids(want))
	}
	if n := len(whole); n == 0 || whole[n-1].event != "values" || !strings.Contains(whole[n-1].data, "three") {
		t.Fatalf("the run did not end with its last values: %v", ids(whole))
	}
	return lost
}

func ids(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.id + "/" + ev.event
	}
	return out
}
