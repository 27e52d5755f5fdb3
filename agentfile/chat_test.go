package agentfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

func TestChatFileErrors(t *testing.T) {
	const head = "---\nname: c\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\n"
	tests := []struct {
		name, src, want string
	}{
		{"unknown kind", "---\nname: c\nkind: poem\n---\n## Instructions\nx\n", `c.md:3: kind "poem": want chain (the default) or chat`},
		{"a chain", head + "chain:\n  - {id: a, kind: text}\n---\n## Instructions\nx\n", "c.md:5: chain: is for chains"},
		{"an output file", head + "output: {file: out.md}\n---\n## Instructions\nx\n", "c.md:5: output: is for chains"},
		{"a handoff", head + "handoff: {enabled: true, agent_id: b}\n---\n## Instructions\nx\n", "c.md:5: handoff: is for chains"},
		{"schemas", head + "schemas: {S: {type: object}}\n---\n## Instructions\nx\n", "c.md:5: schemas: is for chains"},
		{"a step section", head + "---\n## Instructions\nx\n\n## step:two\ny\n", `c.md:9: "## step:two": a chat has no steps`},
		{"no instructions", head + "---\nHello.\n", `c.md:6: a chat needs a "## Instructions" section`},
		{"pause before a step", head + "tools: [read_file]\ninterrupt_before: [send]\n---\n## Instructions\nx\n", `c.md:6: interrupt_before: "send" is not a node of a chat (agent, tools)`},
		{"pause before no tools", head + "interrupt_before: [tools]\n---\n## Instructions\nx\n", "c.md:5: interrupt_before: tools pauses before tool calls, but the chat has no tools:"},
		{"timeout without a pause", head + "approval: {timeout: 1h}\n---\n## Instructions\nx\n", "c.md:5: approval.timeout needs approve_tools: or interrupt_before"},
		{"bad fallback", head + "tools: [read_file]\ninterrupt_before: [tools]\napproval: {fallback: maybe}\n---\n## Instructions\nx\n", `c.md:7: approval.fallback "maybe"`},
		{"approve an unknown tool", head + "tools: [read_file]\napprove_tools: [write_file]\n---\n## Instructions\nx\n", `c.md:6: approve_tools: "write_file" is not a tool of tools: (read_file)`},
		{"approve without tools", head + "approve_tools: all\n---\n## Instructions\nx\n", "c.md:5: approve_tools: the chat has no tools:"},
		{"approve some", head + "tools: [read_file]\napprove_tools: some\n---\n## Instructions\nx\n", `c.md:6: approve_tools: "some" is not a tool`},
		{"approve all and more", head + "tools: [read_file]\napprove_tools: [all, read_file]\n---\n## Instructions\nx\n", "c.md:6: approve_tools: all stands alone"},
		{"approve twice", head + "tools: [read_file]\napprove_tools: [read_file, read_file]\n---\n## Instructions\nx\n", `c.md:6: approve_tools: "read_file" appears twice`},
		{"approve nothing", head + "tools: [read_file]\napprove_tools: []\n---\n## Instructions\nx\n", "c.md:6: approve_tools: want all or a list"},
		{"approve and pause", head + "tools: [read_file]\ninterrupt_before: [tools]\napprove_tools: all\n---\n## Instructions\nx\n", "c.md:7: approve_tools: and interrupt_before: [tools] both pause"},
		{"approve a map", head + "tools: [read_file]\napprove_tools: {read_file: yes}\n---\n## Instructions\nx\n", "c.md: approve_tools: want all or a list of tool names"},
		{"review format without approvals", head + "tools: [read_file]\nreview_format: agent-inbox\n---\n## Instructions\nx\n", "c.md:6: review_format: without approve_tools"},
		{"unknown review format", head + "tools: [read_file]\napprove_tools: all\nreview_format: inbox\n---\n## Instructions\nx\n", `c.md:7: review_format: "inbox": want langchain (the default) or agent-inbox`},
		{"approve in a chain", "---\nname: c\nchain:\n  - {id: a, kind: text}\napprove_tools: all\n---\n## step:a\nx\n", "c.md:5: approve_tools: is for chats"},
		{"unknown key", head + "turns: 3\n---\n## Instructions\nx\n", `c.md:5: unknown front-matter key "turns"`},
		{"bad secrets", head + "secrets: {patterns: ['(']}\n---\n## Instructions\nx\n", "secrets:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfile.Parse("c.md", []byte(tc.src))
			var fe *agentfile.FileError
			if !errors.Is(err, agentfile.ErrInvalidFile) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v (want %q)", err, tc.want)
			}
		})
	}
	a, err := agentfile.Parse("c.md", []byte(head+"---\n## System prompt\nBe kind.\n"))
	if err != nil || !a.IsChat() {
		t.Fatalf("a chat with a system prompt only: %v", err)
	}
}

// chatFile writes a chat agent file and its script in a new folder.
func chatFile(t testing.TB, front, script string) *agentfile.File {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk"), 0o644)
	src := "---\nname: helper\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\n" + front + "---\n## Instructions\nHelp.\n"
	p := filepath.Join(dir, "helper.md")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := agentfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wireMessage is a message of a chat's state.
type wireMessage struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID, Name string
		Args     json.RawMessage
	} `json:"tool_calls"`
}

func messagesOf(t *testing.T, d state.Doc) []wireMessage {
	t.Helper()
	var ms []wireMessage
	if err := d.Get("messages", &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestChatTurns: a chat keeps its thread's conversation from run to run;
// the model answers the whole of it; the ids of the messages stay; a
// reply that calls a tool pauses for approval, the tool runs once
// approved, and the model answers again with its result.
func TestChatTurns(t *testing.T) {
	a := chatFile(t, "tools: [read_file]\ninterrupt_before: [tools]\n", `replies:
  - user: notes
    tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - user: notes
    echo_tool: true
  - echo_user: "You said: {user}."
    repeat: true
`)
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	cfg := agentfile.RunConfig{Store: s, Thread: "c1"}
	turn := func(in agentfile.Input) *agentfile.Result {
		t.Helper()
		cfg.Input = in
		res, err := agentfile.Run(ctx, a, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := turn(agentfile.TextInput("inline", "hi"))
	if string(res.FinalOutput) != `"You said: hi."` {
		t.Fatalf("turn 1: %s", res.FinalOutput)
	}
	first := messagesOf(t, res.Result.State)
	res = turn(agentfile.Input{Source: "api", Kind: "json", Content: json.RawMessage(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "read my notes"}], "id": "u2"}]}`)})
	if res.Result.StopReason != state.StopInterrupt || len(res.Result.Next) != 1 || res.Result.Next[0].Node != "tools" {
		t.Fatalf("turn 2 did not pause before tools: %+v", res.Result)
	}
	cfg.Answer = flow.Approval{Action: flow.ApprovalApprove, By: "test"}
	res, err := agentfile.Resume(ctx, a, cfg)
	if err != nil || string(res.FinalOutput) != `"remember the milk"` {
		t.Fatalf("approved turn 2: %s %v", res.FinalOutput, err)
	}
	ms := messagesOf(t, res.Result.State)
	types := []string{}
	for _, m := range ms {
		types = append(types, m.Type)
	}
	if strings.Join(types, ",") != "human,ai,human,ai,tool,ai" {
		t.Fatalf("conversation %v", types)
	}
	if ms[0].ID != first[0].ID || ms[1].ID != first[1].ID || ms[2].ID != "u2" || ms[4].ToolCallID != ms[3].ToolCalls[0].ID || ms[4].Content != "remember the milk" {
		t.Fatalf("ids or tool messages changed: %+v then %+v", first, ms)
	}
}

// TestChatRejectedToolCall: a rejected round of tool calls runs no tool;
// the next message is answered with the call marked not run, as the
// model must see every call answered.
func TestChatRejectedToolCall(t *testing.T) {
	a := chatFile(t, "tools: [read_file]\ninterrupt_before: [tools]\n", `replies:
  - user: notes
    tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - echo_tool: true
`)
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	cfg := agentfile.RunConfig{Store: s, Thread: "c2", Input: agentfile.TextInput("inline", "read my notes")}
	if res, err := agentfile.Run(ctx, a, cfg); err != nil || res.Result.StopReason != state.StopInterrupt {
		t.Fatalf("turn 1: %v", err)
	}
	cfg.Answer = flow.Approval{Action: flow.ApprovalReject, Reason: "no"}
	if _, err := agentfile.Resume(ctx, a, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Input = agentfile.TextInput("inline", "never mind")
	res, err := agentfile.Run(ctx, a, cfg)
	if err != nil || string(res.FinalOutput) != `"error: the tool call was not run"` {
		t.Fatalf("turn 2: %s %v", res.FinalOutput, err)
	}
	for _, m := range messagesOf(t, res.Result.State) {
		if m.Type == "tool" {
			t.Fatalf("a rejected call left a tool message: %+v", m)
		}
	}
	// A new message while a call waits for approval goes on without it.
	a = chatFile(t, "tools: [read_file]\ninterrupt_before: [tools]\n", `replies:
  - user: notes
    tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - echo_tool: true
`)
	cfg = agentfile.RunConfig{Store: s, Thread: "c3", Input: agentfile.TextInput("inline", "read my notes")}
	if res, err := agentfile.Run(ctx, a, cfg); err != nil || res.Result.StopReason != state.StopInterrupt {
		t.Fatalf("c3 turn 1: %v", err)
	}
	cfg.Input = agentfile.TextInput("inline", "forget it")
	res, err = agentfile.Run(ctx, a, cfg)
	if err != nil || res.Result.StopReason != state.StopSuccess || string(res.FinalOutput) != `"error: the tool call was not run"` {
		t.Fatalf("a message while paused: %+v %s %v", res, res.FinalOutput, err)
	}
	if head, err := s.Load(ctx, store.LoadRequest{Thread: "c3"}); err != nil || agentfile.Unfinished(head) {
		t.Fatalf("the thread is left unfinished: %v", err)
	}
}

// TestChatPlacesRefused: a chat is not a handoff's target and runs at a
// thread's root only; its input and state updates are messages.
func TestChatPlacesRefused(t *testing.T) {
	a := chatFile(t, "", "replies:\n  - text: hi\n    repeat: true\n")
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	_, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: "n", Namespace: "gate1", Input: agentfile.TextInput("inline", "x")})
	if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), "thread's root") {
		t.Fatalf("in a namespace: %v", err)
	}
	dir := filepath.Dir(a.Path)
	os.WriteFile(filepath.Join(dir, "first.md"), []byte("---\nname: first\nmodel: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: helper}\n---\n## Instructions\nx\n"), 0o644)
	first, err := agentfile.Load(filepath.Join(dir, "first.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := agentfile.Check(first, agentfile.RunConfig{}); !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), "first.md:4: handoff.agent_id") {
		t.Fatalf("handoff to a chat: %v", err)
	}
	_, err = agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: "bad", Input: agentfile.Input{Kind: "json", Content: json.RawMessage(`{"messages": [{"role": "robot", "content": "x"}]}`)}})
	var ce *agentfile.ChatInputError
	if !errors.As(err, &ce) || ce.Path != "$.messages[0].role" {
		t.Fatalf("bad input: %v", err)
	}
	if _, err := s.Thread(ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bad input stored a thread: %v", err)
	}
	if _, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: "u", Input: agentfile.TextInput("inline", "hi")}); err != nil {
		t.Fatal(err)
	}
	_, err = agentfile.UpdateState(ctx, a, agentfile.RunConfig{Store: s, Thread: "u"}, 0, state.Update{"steps": map[string]any{}}, "agent")
	if !errors.As(err, &ce) || ce.Path != "$.steps" {
		t.Fatalf("update of another field: %v", err)
	}
	cp, err := agentfile.UpdateState(ctx, a, agentfile.RunConfig{Store: s, Thread: "u"}, 0, state.Update{"messages": []any{map[string]any{"role": "assistant", "content": "edited", "id": "x"}}}, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if ms := messagesOf(t, cp.State); len(ms) != 3 || ms[2].Type != "ai" || ms[2].ID != "x" {
		t.Fatalf("updated state %+v", ms)
	}
}

// TestChatMemory: a chat's tools reach the long-term memory store: what
// memory_put keeps in one turn, memory_get finds in a later one, and the
// second tool call's result is what the model answers with.
func TestChatMemory(t *testing.T) {
	a := chatFile(t, "tools: [memory_put, memory_get]\nmemory: {namespace: [notes, \"{thread}\"]}\n", `replies:
  - user: remember
    tool_calls: [{name: memory_put, args: {key: tea, value: {text: green tea}}}]
  - user: remember
    text: Noted.
  - user: what do I like
    tool_calls: [{name: memory_get, args: {key: tea}}]
  - user: what do I like
    echo_tool: true
`)
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	cfg := agentfile.RunConfig{Store: s, Thread: "m1", Conversations: agentfile.NewConversationCache(1 << 20)}
	for _, turn := range []struct{ in, want string }{
		{"remember: I like green tea", `"Noted."`},
		{"what do I like?", `{\"text\":\"green tea\"}`},
	} {
		cfg.Input = agentfile.TextInput("inline", turn.in)
		res, err := agentfile.Run(ctx, a, cfg)
		if err != nil || !strings.Contains(string(res.FinalOutput), turn.want) {
			t.Fatalf("%q: %s %v", turn.in, res.FinalOutput, err)
		}
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, m := range messagesOf(t, head.State) {
		types = append(types, m.Type)
	}
	if strings.Join(types, ",") != "human,ai,tool,ai,human,ai,tool,ai" {
		t.Fatalf("conversation %v", types)
	}
}
