package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// v2Channels are every channel of the thread-centric protocol.
var v2Channels = []string{"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"}

// v2Events opens a thread's protocol event stream after since (0: from
// its newest run).
func v2Events(t *testing.T, ctx context.Context, url, thread string, since int64) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"channels": v2Channels, "since": since})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/threads/"+thread+"/stream/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("events of %s: %d", thread, res.StatusCode)
	}
	return res
}

// v2Event is what a test compares of a protocol event: all but its time.
type v2Event struct {
	ID, Method string
	Seq        int64
	NS, Data   string
}

func decodeV2(t *testing.T, evs []sseEvent) []v2Event {
	t.Helper()
	out := make([]v2Event, 0, len(evs))
	for _, e := range evs {
		var ev struct {
			EventID string `json:"event_id"`
			Seq     int64  `json:"seq"`
			Method  string `json:"method"`
			Params  struct {
				Namespace []string        `json:"namespace"`
				Node      string          `json:"node"`
				Data      json.RawMessage `json:"data"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			t.Fatalf("event %s: %v", e.data, err)
		}
		if ev.EventID != e.id || ev.Method != e.event {
			t.Fatalf("SSE id/event %s/%s, the event's %s/%s", e.id, e.event, ev.EventID, ev.Method)
		}
		out = append(out, v2Event{ID: ev.EventID, Method: ev.Method, Seq: ev.Seq, NS: strings.Join(ev.Params.Namespace, "|") + "/" + ev.Params.Node, Data: string(ev.Params.Data)})
	}
	return out
}

// endsRun reports whether the last event read ends a run at the root.
func endsRun(evs []sseEvent) bool {
	e := evs[len(evs)-1]
	return e.event == "lifecycle" && (strings.Contains(e.data, `"event":"completed"`) || strings.Contains(e.data, `"event":"failed"`) || strings.Contains(e.data, `"event":"interrupted"`)) && strings.Contains(e.data, `"namespace":[]`)
}

// command runs a protocol command on a thread and returns its reply.
func (p *serveProcess) command(t *testing.T, thread string, id int, method string, params any) map[string]any {
	t.Helper()
	var reply map[string]any
	if code := p.call(t, "POST", "/threads/"+thread+"/commands", map[string]any{"id": id, "method": method, "params": params}, &reply); code != 200 {
		t.Fatalf("%s: %d %v", method, code, reply)
	}
	return reply
}

// TestV2StreamSurvivesRestart reads a thread's protocol events while its
// run streams a long reply, SIGKILLs the server mid-run, and reads on with
// since from a new server on the same store: what the two connections
// read is the thread's stream as a reader from the start reads it, no
// event twice, none left out, the run's second attempt streaming its
// message anew; a second turn follows on the same stream, numbered after.
func TestV2StreamSurvivesRestart(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "chat.db")
	args := []string{"--assistants", filepath.Join("testdata", "usestream"), "--store", db}
	a := startServe(t, args...)
	thread := uuid.NewString()
	start := a.command(t, thread, 1, "run.start", map[string]any{"assistant_id": "chat", "input": map[string]any{"messages": []any{map[string]any{"type": "human", "content": "tell me a long story"}}}})
	if start["type"] != "success" {
		t.Fatalf("run.start: %v", start)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deltas := 0
	first := decodeV2(t, readSSE(t, v2Events(t, ctx, a.url, thread, 0), func(evs []sseEvent) bool {
		if strings.Contains(evs[len(evs)-1].data, "content-block-delta") {
			deltas++
		}
		return deltas == 15
	}))
	a.stop(syscall.SIGKILL)

	b := startServe(t, args...)
	last := first[len(first)-1].Seq
	rest := decodeV2(t, readSSE(t, v2Events(t, ctx, b.url, thread, last), endsRun))
	whole := decodeV2(t, readSSE(t, v2Events(t, ctx, b.url, thread, 0), endsRun))
	checkReadOn(t, first, rest, whole)

	// A second turn: the stream goes on into the next run, numbered after.
	res := v2Events(t, ctx, b.url, thread, whole[len(whole)-1].Seq)
	b.command(t, thread, 2, "run.start", map[string]any{"assistant_id": "chat", "input": map[string]any{"messages": []any{map[string]any{"type": "human", "content": "hello"}}}})
	next := decodeV2(t, readSSE(t, res, endsRun))
	if next[0].Method != "lifecycle" || !strings.Contains(next[0].Data, `"running"`) || next[0].Seq <= whole[len(whole)-1].Seq {
		t.Fatalf("the second turn's stream starts %+v", next[0])
	}
}

// checkReadOn checks what a reader read of a run in two connections (the
// second with since) against the run as a reader from its start reads it
// afterwards: the first may have read events of an attempt that a crash
// cut short and nobody stored (a server streams before it stores); the
// rest is the stored stream, each event once, in order; each attempt
// streams the reply from its start, and the run completes.
func checkReadOn(t *testing.T, first, rest, whole []v2Event) {
	t.Helper()
	joined := append(append([]v2Event{}, first...), rest...)
	stored := map[string]v2Event{}
	for _, e := range whole {
		stored[e.ID] = e
	}
	j := 0
	for i, e := range joined {
		if i > 0 && e.Seq <= joined[i-1].Seq {
			t.Fatalf("event %d (%s) repeats or goes back", i, e.ID)
		}
		if w, ok := stored[e.ID]; ok {
			if e != w || whole[j] != w {
				t.Fatalf("event %d: read in two %+v, stored %+v, next stored %+v", i, e, w, whole[j])
			}
			j++
		} else if slot := (e.Seq >> 20) & 63; slot != 1 {
			t.Fatalf("event %d read but not stored is of part %d of the run, not of the attempt cut short: %+v", i, slot, e)
		}
	}
	if j != len(whole) {
		t.Fatalf("read in two: %d of the %d stored events", j, len(whole))
	}
	starts := 0
	for _, e := range whole {
		if strings.Contains(e.Data, `"message-start"`) {
			starts++
		}
	}
	if starts != 2 || !strings.Contains(whole[len(whole)-1].Data, `"completed"`) {
		t.Fatalf("want the reply started by each attempt (2 message-starts, got %d) and the run completed: %+v", starts, whole[len(whole)-1])
	}
}

// TestV2StreamAcrossWorkers reads a thread's protocol events through
// cairn serve --queue while a worker runs its long reply on PostgreSQL,
// SIGKILLs that worker mid-reply, and reads on with since: another worker
// takes the run over, and the reader gets every stored event once.
func TestV2StreamAcrossWorkers(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_v2")
	assistants := filepath.Join("testdata", "usestream")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", dsn)
	workers := map[string]*workerProcess{}
	for _, id := range []string{"w1", "w2"} {
		workers[id] = startWorker(t, "--id", id, "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	}
	thread := uuid.NewString()
	p.command(t, thread, 1, "run.start", map[string]any{"assistant_id": "chat", "input": map[string]any{"messages": []any{map[string]any{"type": "human", "content": "tell me a long story"}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deltas := 0
	first := decodeV2(t, readSSE(t, v2Events(t, ctx, p.url, thread, 0), func(evs []sseEvent) bool {
		if strings.Contains(evs[len(evs)-1].data, "content-block-delta") {
			deltas++
		}
		return deltas == 15
	}))
	owner := workers[ownerOf(t, dsn, thread)]
	if owner == nil {
		t.Fatalf("the thread's lease is none of the workers'")
	}
	owner.stop(syscall.SIGKILL)
	rest := decodeV2(t, readSSE(t, v2Events(t, ctx, p.url, thread, first[len(first)-1].Seq), endsRun))
	whole := decodeV2(t, readSSE(t, v2Events(t, ctx, p.url, thread, 0), endsRun))
	checkReadOn(t, first, rest, whole)
}
