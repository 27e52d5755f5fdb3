package agentfile_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
)

func TestChatMessages(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"a string", `"hi"`, []string{`{"type":"human","content":"hi"}`}},
		{"null", `null`, nil},
		{"LangGraph's shape", `{"messages": [{"type": "human", "content": "hi", "id": "m1"}]}`, []string{`{"id":"m1","type":"human","content":"hi"}`}},
		{"roles", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "system", "content": "be brief"}, {"role": "developer", "content": "x"}]}`,
			[]string{`{"type":"human","content":"hi"}`, `{"type":"ai","content":"hello"}`, `{"type":"system","content":"be brief"}`, `{"type":"system","content":"x"}`}},
		{"one message, not a list", `{"messages": {"role": "user", "content": "hi"}}`, []string{`{"type":"human","content":"hi"}`}},
		{"a string as messages", `{"messages": "hi"}`, []string{`{"type":"human","content":"hi"}`}},
		{"strings in the list", `{"messages": ["a", "b"]}`, []string{`{"type":"human","content":"a"}`, `{"type":"human","content":"b"}`}},
		{"content blocks and extra members kept", `{"messages": [{"type": "human", "content": [{"type": "text", "text": "hi"}], "additional_kwargs": {}, "id": null}]}`,
			[]string{`{"type":"human","content":[{"type":"text","text":"hi"}],"additional_kwargs":{}}`}},
		{"tool calls and their results", `{"messages": [{"type": "ai", "tool_calls": [{"id": "c1", "name": "f"}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok", "name": "f"}]}`,
			[]string{`{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"f","args":{},"type":"tool_call"}]}`, `{"type":"tool","content":"ok","name":"f","tool_call_id":"c1"}`}},
		{"a removal", `{"messages": [{"type": "remove", "id": "m1", "content": "ignored"}]}`, []string{`{"id":"m1","type":"remove"}`}},
		{"no messages", `{}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentfile.ChatMessages(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, m := range got {
				s = append(s, string(m))
			}
			if strings.Join(s, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestChatMessagesErrors(t *testing.T) {
	tests := []struct{ name, in, path string }{
		{"a number", `3`, "$"},
		{"a list", `[{"role": "user", "content": "x"}]`, "$"},
		{"another field", `{"messages": [], "context": {}}`, "$.context"},
		{"no type or role", `{"messages": [{"content": "x"}]}`, "$.messages[0]"},
		{"unknown role", `{"messages": ["ok", {"role": "robot", "content": "x"}]}`, "$.messages[1].role"},
		{"type not a string", `{"messages": [{"type": 3, "content": "x"}]}`, "$.messages[0].type"},
		{"no content", `{"messages": [{"role": "user"}]}`, "$.messages[0].content"},
		{"content a number", `{"messages": [{"role": "user", "content": 3}]}`, "$.messages[0].content"},
		{"a block without type", `{"messages": [{"role": "user", "content": [{"text": "x"}]}]}`, "$.messages[0].content[0]"},
		{"empty id", `{"messages": [{"role": "user", "content": "x", "id": ""}]}`, "$.messages[0].id"},
		{"removal without id", `{"messages": [{"type": "remove"}]}`, "$.messages[0]"},
		{"tool without call id", `{"messages": [{"type": "tool", "content": "x"}]}`, "$.messages[0].tool_call_id"},
		{"tool call without name", `{"messages": [{"type": "ai", "content": "", "tool_calls": [{"id": "c"}]}]}`, "$.messages[0].tool_calls[0].name"},
		{"tool call without id", `{"messages": [{"type": "ai", "content": "", "tool_calls": [{"name": "f"}]}]}`, "$.messages[0].tool_calls[0].id"},
		{"tool call args a list", `{"messages": [{"type": "ai", "content": "", "tool_calls": [{"id": "c", "name": "f", "args": [1]}]}]}`, "$.messages[0].tool_calls[0].args"},
		{"a human calls tools", `{"messages": [{"type": "human", "content": "x", "tool_calls": [{"id": "c", "name": "f"}]}]}`, "$.messages[0].tool_calls"},
		{"name not a string", `{"messages": [{"type": "human", "content": "x", "name": 1}]}`, "$.messages[0].name"},
		{"not JSON", `{"messages": [`, "$"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfile.ChatMessages(json.RawMessage(tc.in))
			var ce *agentfile.ChatInputError
			if !errors.As(err, &ce) || !errors.Is(err, agentfile.ErrChatInput) || ce.Path != tc.path {
				t.Fatalf("%v (want an error at %s)", err, tc.path)
			}
		})
	}
}

// FuzzChatMessages: any input gives messages (each a JSON object with a
// type the state knows) or a *ChatInputError, never a panic.
func FuzzChatMessages(f *testing.F) {
	f.Add(`"hi"`)
	f.Add(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}], "id": "a"}]}`)
	f.Add(`{"messages": [{"type": "ai", "content": "", "tool_calls": [{"id": "c", "name": "f", "args": {"x": 1}}]}, {"type": "tool", "tool_call_id": "c", "content": "ok"}]}`)
	f.Add(`{"messages": {"type": "remove", "id": "__remove_all__"}}`)
	f.Add(`{"messages": [{"type": "human", "content": "x", "id": null, "tool_calls": null}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		msgs, err := agentfile.ChatMessages(json.RawMessage(in))
		if err != nil {
			var ce *agentfile.ChatInputError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Path, "$") {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		for _, m := range msgs {
			var head struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(m, &head); err != nil || head.Type == "" {
				t.Fatalf("message %s: %v", m, err)
			}
			again, err := agentfile.ChatMessages(json.RawMessage(`{"messages": [` + string(m) + `]}`))
			if err != nil || len(again) != 1 || string(again[0]) != string(m) {
				t.Fatalf("a normalized message changes when read again: %s → %s %v", m, again, err)
			}
		}
	})
}
