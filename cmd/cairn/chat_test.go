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
)

// chatMsg is a message of the chat assistant's state, as the API shows it.
type chatMsg struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID   string         `json:"id"`
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"tool_calls"`
}

// chatState is a thread's state as GET /threads/{id}/state answers it.
type chatState struct {
	Values struct {
		Messages []chatMsg `json:"messages"`
	} `json:"values"`
	Next []string `json:"next"`
}

// post sends a JSON request and returns the status and the raw answer
// (a stream's SSE text).
func (p *serveProcess) post(t *testing.T, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(p.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// chatTurn sends one user message through runs/wait and returns the
// state it answers.
func chatTurn(t *testing.T, p *serveProcess, tid, text string) []chatMsg {
	t.Helper()
	var out struct {
		Messages []chatMsg `json:"messages"`
	}
	if code := p.call(t, "POST", "/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "chat",
		"input": map[string]any{"messages": []map[string]any{{"role": "user", "content": text}}}}, &out); code != 200 {
		t.Fatalf("turn %q: %d", text, code)
	}
	return out.Messages
}

func types(ms []chatMsg) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return strings.Join(out, ",")
}

// TestServeChat drives examples/serve/chat.md (kind: chat) through cairn
// serve's HTTP API turn after turn: the conversation is kept and its ids
// stay; a question about files makes the model call a tool, which waits
// for review (approve_tools: all; answers that do not fit are 422s that
// store nothing); the approved call runs and
// the model answers with its result; bad input is a 422 that stores
// nothing; a secret in a message and one in a reply are redacted in the
// answers, the stream and every byte of the SQLite files.
func TestServeChat(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "serve.db")
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+db)
	var th map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)

	first := chatTurn(t, p, tid, "hi")
	if types(first) != "human,ai" || !strings.HasPrefix(first[1].Content.(string), "You said: hi. xxx") {
		t.Fatalf("turn 1: %+v", first)
	}
	// A tool call waits for approval.
	paused := chatTurn(t, p, tid, "Which files are there?")
	if types(paused) != "human,ai,human,ai" || len(paused[3].ToolCalls) != 1 || paused[3].ToolCalls[0].Name != "list_files" {
		t.Fatalf("turn 2: %+v", paused)
	}
	var st chatState
	p.call(t, "GET", "/threads/"+tid+"/state", nil, &st)
	if strings.Join(st.Next, ",") != "tools" {
		t.Fatalf("turn 2 is not paused before tools: %+v", st)
	}
	var pending []struct {
		InterruptID string `json:"interrupt_id"`
		Value       struct {
			ActionRequests []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"action_requests"`
			ReviewConfigs []struct {
				AllowedDecisions []string `json:"allowed_decisions"`
			} `json:"review_configs"`
		} `json:"value"`
	}
	p.call(t, "GET", "/threads/"+tid+"/interrupts", nil, &pending)
	if len(pending) != 1 || len(pending[0].Value.ActionRequests) != 1 || pending[0].Value.ActionRequests[0].Name != "list_files" || pending[0].Value.ActionRequests[0].Args["dir"] != "." ||
		len(pending[0].Value.ReviewConfigs) != 1 || strings.Join(pending[0].Value.ReviewConfigs[0].AllowedDecisions, ",") != "approve,edit,reject" {
		t.Fatalf("pending interrupts %+v", pending)
	}
	// Answers that do not fit the review: a 422 at their place, nothing stored.
	badAnswers := []struct {
		path string
		body any
		want string
	}{
		{"/threads/" + tid + "/interrupts/" + pending[0].InterruptID + "/answer", map[string]any{"action": "edit", "value": map[string]any{"nope": map[string]any{}}}, "$.value.nope"},
		{"/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "chat", "input": map[string]any{}, "command": map[string]any{"resume": []any{map[string]any{"type": "maybe"}}}}, "$.command.resume[0].type"},
		{"/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "chat", "command": map[string]any{"resume": []any{map[string]any{"type": "edit", "args": map[string]any{"action": "read_file", "args": map[string]any{}}}}}}, "$.command.resume[0].args.action"},
		{"/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "chat", "command": map[string]any{"resume": map[string]any{"decisions": []any{map[string]any{"type": "edit", "edited_action": map[string]any{"name": "read_file", "args": map[string]any{}}}}}}}, "$.command.resume.decisions[0].edited_action.name"},
	}
	var before []map[string]any
	p.call(t, "GET", "/threads/"+tid+"/history", nil, &before)
	for _, b := range badAnswers {
		var bad map[string]any
		if code := p.call(t, "POST", b.path, b.body, &bad); code != 422 || bad["path"] != b.want {
			t.Fatalf("bad answer %v: %d %v", b.body, code, bad)
		}
	}
	var after []map[string]any
	p.call(t, "GET", "/threads/"+tid+"/history", nil, &after)
	if len(after) != len(before) {
		t.Fatalf("a bad answer stored a checkpoint: %d then %d", len(before), len(after))
	}
	var run struct {
		RunID string `json:"run_id"`
	}
	if code := p.call(t, "POST", "/threads/"+tid+"/interrupts/"+pending[0].InterruptID+"/answer", map[string]any{"action": "approve", "by": "ops"}, &run); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	p.call(t, "GET", "/threads/"+tid+"/runs/"+run.RunID+"/join", nil, nil)
	p.call(t, "GET", "/threads/"+tid+"/state", nil, &st)
	ms := st.Values.Messages
	if types(ms) != "human,ai,human,ai,tool,ai" || ms[4].ToolCallID != ms[3].ToolCalls[0].ID || !strings.Contains(ms[5].Content.(string), `"chat.md"`) || len(st.Next) != 0 {
		t.Fatalf("after the approval: %+v", st)
	}

	// Bad input: a 422 at its place, nothing stored.
	var bad map[string]any
	code := p.call(t, "POST", "/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "chat", "input": map[string]any{"messages": []map[string]any{{"role": "robot", "content": "x"}}}}, &bad)
	if code != 422 || bad["path"] != "$.input.messages[0].role" {
		t.Fatalf("bad input: %d %v", code, bad)
	}

	// Secrets: one the user sends, one the model replies with.
	const userSecret, replySecret = "sk-user-0123456789abcdefXYZ", "sk-staging-4f9a8b7c6d5e4f3a"
	said := chatTurn(t, p, tid, "my key is "+userSecret)
	code, sse := p.post(t, "/threads/"+tid+"/runs/stream", map[string]any{"assistant_id": "chat", "stream_mode": []string{"messages-tuple", "values"},
		"input": map[string]any{"messages": []map[string]any{{"role": "user", "content": "What is the staging key?"}}}})
	if code != 200 || !strings.Contains(sse, "event: messages") || !strings.Contains(sse, "The staging key is [REDACTED]") {
		t.Fatalf("stream: %d %s", code, sse)
	}
	p.call(t, "GET", "/threads/"+tid+"/state", nil, &st)
	ms = st.Values.Messages
	if len(ms) != 10 || len(said) != 8 || ms[0].ID != first[0].ID || ms[1].ID != first[1].ID || ms[3].ID != paused[3].ID {
		t.Fatalf("the conversation or its ids changed: %+v", ms)
	}
	for _, m := range ms {
		if m.ID == "" {
			t.Fatalf("a message without id: %+v", m)
		}
	}
	all, _ := json.Marshal(ms)
	if strings.Contains(string(all)+sse, userSecret) || strings.Contains(string(all)+sse, replySecret) || !strings.Contains(string(all), "my key is [REDACTED]") {
		t.Fatalf("a secret was shown: %s\n%s", all, sse)
	}
	// A secret in an approval's edit: the call runs with it redacted, and
	// the reply's call shows the edit, redacted.
	const editSecret = "sk-edit-0123456789abcdefXYZ"
	var th2 map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th2)
	tid2 := th2["thread_id"].(string)
	chatTurn(t, p, tid2, "review: edit")
	p.call(t, "GET", "/threads/"+tid2+"/interrupts", nil, &pending)
	if len(pending) != 1 {
		t.Fatalf("review: edit did not wait: %+v", pending)
	}
	if code := p.call(t, "POST", "/threads/"+tid2+"/interrupts/"+pending[0].InterruptID+"/answer", map[string]any{"action": "edit", "value": map[string]any{"list_files": map[string]any{"dir": editSecret}}}, &run); code != 200 {
		t.Fatalf("edit: %d", code)
	}
	p.call(t, "GET", "/threads/"+tid2+"/runs/"+run.RunID+"/join", nil, nil)
	p.call(t, "GET", "/threads/"+tid2+"/state", nil, &st)
	if ms := st.Values.Messages; types(ms) != "human,ai,tool,ai" || ms[1].ToolCalls[0].Args["dir"] != "[REDACTED]" {
		t.Fatalf("after the edit: %+v", ms)
	}
	p.stop(syscall.SIGTERM)
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(userSecret)) || bytes.Contains(b, []byte(replySecret)) || bytes.Contains(b, []byte(editSecret)) {
			t.Fatalf("%s holds a secret", f)
		}
	}
	if b, _ := os.ReadFile(db); !bytes.Contains(b, []byte("my key is [REDACTED]")) && !walHolds(db, "my key is [REDACTED]") {
		t.Fatal("the store does not hold the redacted message: the search for secrets read the wrong bytes")
	}
}

// walHolds reports whether the write-ahead log of db holds s.
func walHolds(db, s string) bool {
	b, _ := os.ReadFile(db + "-wal")
	return bytes.Contains(b, []byte(s))
}

// TestLangGraphSDKChat runs server/sdktest/chat.test.mjs: the official
// LangGraph JS SDK drives the chat assistant of examples/serve as a chat
// front end does (runs.stream in messages-tuple and values modes, turn
// after turn, a tool call approved with a command).
func TestLangGraphSDKChat(t *testing.T) {
	node, dir := sdkSuite(t)
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(t.TempDir(), "serve.db"))
	runNode(t, node, dir, []string{"CAIRN_URL=" + p.url}, "--test", "chat.test.mjs")
}
