package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// steerFiles: a chat whose first model call takes 600 ms and calls a
// tool; later calls answer the last user message.
var steerFiles = map[string]string{
	"chat.md":            "---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: replies/chat.yaml}\ntools: [list_files]\n---\n\n## Instructions\n\nHelp.\n",
	"chain.md":           "---\nname: chain\nmodel: {provider: scripted, script: replies/chain.yaml}\nchain:\n  - {id: a, kind: text, prompt_section: \"step:a\"}\n---\n\n## step:a\n\nA.\n",
	"replies/chat.yaml":  "replies:\n  - {tool_calls: [{name: list_files, args: {dir: .}}], delay_ms: 600}\n  - {echo_user: \"You said: {user}\", repeat: true}\n",
	"replies/chain.yaml": "replies:\n  - {text: done, repeat: true}\n",
}

// TestSteerHTTP: a message sent to a thread while its run calls the model
// is taken before the next model call (after the tool's result), answered
// by it, and listed consumed at the checkpoint that took it; the run's
// updates stream names the entry. Bad messages, missing threads and
// assistants that take no steering are refused, storing nothing.
func TestSteerHTTP(t *testing.T) {
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: assistantsFrom(t, steerFiles)})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	ts.json("POST", "/threads", map[string]any{"thread_id": "c1"}, 200)
	run := ts.json("POST", "/threads/c1/runs", map[string]any{"assistant_id": "chat", "input": "which files?", "stream_mode": []string{"updates"}}, 200)
	time.Sleep(150 * time.Millisecond) // the model is thinking
	en := ts.json("POST", "/threads/c1/steer", map[string]any{"message": "also check the invoice date"}, 202)
	if en["seq"] != 1.0 || en["kind"] != "steer" || en["state"] != "pending" {
		t.Fatalf("accepted: %v", en)
	}
	evs := ts.stream("GET", fmt.Sprintf("/threads/c1/runs/%s/stream", run["run_id"]), nil, "", nil)
	st := ts.json("GET", "/threads/c1/state", nil, 200)
	msgs := st["values"].(map[string]any)["messages"].([]any)
	var got []string
	for _, m := range msgs {
		mm := m.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v", mm["type"], mm["content"]))
	}
	want := "human:which files?|ai:|tool:" // then the steer, then the answer to it
	if len(got) != 5 || !strings.HasPrefix(strings.Join(got, "|"), want) || got[3] != "human:also check the invoice date" || got[4] != "ai:You said: also check the invoice date" {
		t.Fatalf("messages: %q", got)
	}
	inbox := ts.json("GET", "/threads/c1/inbox", nil, 200)["list"].([]any)
	item := inbox[0].(map[string]any)
	if len(inbox) != 1 || item["state"] != "consumed" || item["checkpoint_id"] == nil {
		t.Fatalf("inbox: %v", inbox)
	}
	// The checkpoint named consumed it: its metadata's usage counts it.
	hist := ts.json("POST", "/threads/c1/history", map[string]any{"limit": 20}, 200)["list"].([]any)
	named := false
	for _, h := range hist {
		cp := h.(map[string]any)["checkpoint"].(map[string]any)
		named = named || cp["checkpoint_id"] == item["checkpoint_id"]
	}
	seen := false
	for _, ev := range evs {
		seen = seen || ev.Event == "updates" && strings.Contains(string(ev.Data), `"__inbox__":{"entries":[1]`)
	}
	if !named || !seen {
		t.Fatalf("checkpoint %v in the history: %v; the steer in the updates stream: %v", item["checkpoint_id"], named, seen)
	}

	ts.json("POST", "/threads", map[string]any{"thread_id": "k1"}, 200)
	ts.json("POST", "/threads/k1/runs/wait", map[string]any{"assistant_id": "chain", "input": "go"}, 200)
	for _, tc := range []struct {
		name, path string
		body       any
		code       int
		says       string
	}{
		{"no message", "/threads/c1/steer", map[string]any{}, 422, "message"},
		{"a number", "/threads/c1/steer", map[string]any{"message": 5}, 422, "message"},
		{"no content", "/threads/c1/steer", map[string]any{"message": map[string]any{"type": "human"}}, 422, "content"},
		{"no type", "/threads/c1/steer", map[string]any{"message": map[string]any{"content": "x"}}, 422, "type"},
		{"not JSON", "/threads/c1/steer", "{", 422, ""},
		{"missing thread", "/threads/nope/steer", map[string]any{"message": "x"}, 404, "nope"},
		{"a chain", "/threads/k1/steer", map[string]any{"message": "x"}, 409, "chats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do("POST", tc.path, tc.body)
			if code != tc.code || !strings.Contains(string(b), tc.says) {
				t.Fatalf("%d %s", code, b)
			}
		})
	}
	if inbox := ts.json("GET", "/threads/c1/inbox", nil, 200)["list"].([]any); len(inbox) != 1 {
		t.Fatalf("refused messages were stored: %v", inbox)
	}
	var list []map[string]any
	_, b := ts.do("GET", "/threads/k1/inbox", nil)
	if err := json.Unmarshal(b, &list); err != nil || len(list) != 0 {
		t.Fatalf("the chain's inbox: %s", b)
	}
}

// TestSteerFollowUp: a follow-up sent while a run runs waits for its end,
// then a new run answers it; one sent to an idle thread starts a run at
// once; each lists the run made of it.
func TestSteerFollowUp(t *testing.T) {
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: assistantsFrom(t, steerFiles)})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	ts.json("POST", "/threads", map[string]any{"thread_id": "c1"}, 200)
	ts.json("POST", "/threads/c1/runs", map[string]any{"assistant_id": "chat", "input": "which files?"}, 200)
	time.Sleep(150 * time.Millisecond)
	ts.json("POST", "/threads/c1/steer", map[string]any{"message": "then summarise", "follow_up": true}, 202)
	got := waitMessages(t, ts, "c1", 6)
	if got[3] != "ai:You said: which files?" || got[4] != "human:then summarise" || got[5] != "ai:You said: then summarise" {
		t.Fatalf("messages: %q", got)
	}
	ts.json("POST", "/threads/c1/steer", map[string]any{"message": map[string]any{"role": "user", "content": "one more"}}, 202)
	got = waitMessages(t, ts, "c1", 8)
	if got[6] != "human:one more" || got[7] != "ai:You said: one more" {
		t.Fatalf("messages: %q", got)
	}
	inbox := ts.json("GET", "/threads/c1/inbox", nil, 200)["list"].([]any)
	for _, it := range inbox {
		if m := it.(map[string]any); m["state"] != "consumed" || m["run_id"] == nil || m["checkpoint_id"] == nil {
			t.Fatalf("inbox: %v", inbox)
		}
	}
	runs := ts.json("GET", "/threads/c1/runs", nil, 200)["list"].([]any)
	if len(inbox) != 2 || len(runs) != 3 {
		t.Fatalf("inbox %v, %d runs", inbox, len(runs))
	}
}

// waitMessages waits for a thread to be idle with n messages, and
// returns them as type:content.
func waitMessages(t *testing.T, ts *testServer, thread string, n int) []string {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(30 * time.Millisecond) {
		st := ts.json("GET", "/threads/"+thread, nil, 200)
		vals, _ := st["values"].(map[string]any)
		msgs, _ := vals["messages"].([]any)
		got = got[:0]
		for _, m := range msgs {
			mm := m.(map[string]any)
			got = append(got, fmt.Sprintf("%v:%v", mm["type"], mm["content"]))
		}
		if st["status"] == "idle" && len(got) >= n {
			return got
		}
	}
	t.Fatalf("thread %s: %q, want %d messages", thread, got, n)
	return nil
}

// TestSteerV2Inject: the protocol's input.inject on a thread whose chat
// is running steers it (taken before its next model call) instead of
// queueing a run; on an idle thread it is a run of its own, as before.
func TestSteerV2Inject(t *testing.T) {
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: assistantsFrom(t, steerFiles)})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	if r := ts.cmd("c1", 1, "run.start", map[string]any{"assistant_id": "chat", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "which files?"}}}}); r["type"] != "success" {
		t.Fatalf("run.start: %v", r)
	}
	time.Sleep(150 * time.Millisecond)
	if r := ts.cmd("c1", 2, "input.inject", map[string]any{"message": map[string]any{"role": "user", "content": "also the date"}}); r["type"] != "success" {
		t.Fatalf("input.inject: %v", r)
	}
	got := waitMessages(t, ts, "c1", 5)
	if got[3] != "human:also the date" || got[4] != "ai:You said: also the date" {
		t.Fatalf("messages: %q", got)
	}
	if runs := ts.json("GET", "/threads/c1/runs", nil, 200)["list"].([]any); len(runs) != 1 {
		t.Fatalf("%d runs: the inject made a run of its own", len(runs))
	}
	if r := ts.cmd("c1", 3, "input.inject", map[string]any{"message": map[string]any{"role": "user", "content": "and now?"}}); r["type"] != "success" {
		t.Fatalf("input.inject on an idle thread: %v", r)
	}
	got = waitMessages(t, ts, "c1", 7)
	if got[5] != "human:and now?" || len(ts.json("GET", "/threads/c1/runs", nil, 200)["list"].([]any)) != 2 {
		t.Fatalf("messages: %q", got)
	}
}
