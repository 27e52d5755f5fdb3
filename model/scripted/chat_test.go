package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/scripted"
)

// TestChatReplies: user: picks a reply by the last user message, echo_user
// answers it, pad_to pads the text with x, repeat is never used up.
func TestChatReplies(t *testing.T) {
	m, err := scripted.Parse("chat.yaml", []byte(`replies:
  - text: "Sunny."
    user: WEATHER
  - echo_user: "You said: {user}. "
    pad_to: 40
    repeat: true
`))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(msgs ...string) (string, error) {
		var req agent.Request
		for i, s := range msgs {
			role := agent.RoleUser
			if i%2 == 1 {
				role = agent.RoleAssistant
			}
			req.Messages = append(req.Messages, agent.Message{Role: role, Content: s})
		}
		r, err := m.Generate(context.Background(), req)
		return r.Message.Content, err
	}
	tests := []struct {
		name string
		msgs []string
		want string
	}{
		{"echo, padded", []string{"hi"}, "You said: hi. " + strings.Repeat("x", 40-len("You said: hi. "))},
		{"the user's text picks", []string{"hi", "…", "What is the weather like?"}, "Sunny."},
		{"used up: the echo again", []string{"weather again?"}, "You said: weather again?. " + strings.Repeat("x", 40-len("You said: weather again?. "))},
		{"longer than pad_to: not cut", []string{strings.Repeat("long ", 10)}, "You said: " + strings.Repeat("long ", 10) + ". "},
		{"repeat: still there", []string{"bye"}, "You said: bye. " + strings.Repeat("x", 40-len("You said: bye. "))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ask(tc.msgs...)
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestChatReplyErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"pad a tool call", "replies:\n  - tool_calls: [{name: a}]\n    pad_to: 10\n", "chat.yaml:2: pad_to pads a text reply"},
		{"negative pad", "replies:\n  - text: a\n    pad_to: -1\n", "must not be negative"},
		{"echo_user and text", "replies:\n  - echo_user: a\n    text: b\n", "exactly one"},
		{"user not a string", "replies:\n  - text: a\n    user: [x]\n", "chat.yaml:2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scripted.Parse("chat.yaml", []byte(tc.in))
			if !errors.Is(err, scripted.ErrScript) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v (want %q)", err, tc.want)
			}
		})
	}
}
