package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/scripted"
)

const script = `replies:
  - text: "Acme GmbH"
    step: company_name
  - json: {company_name: Acme, location: Berlin, tags: [a, b]}
  - tool_calls:
      - name: write_files
        args: {files: [{filename: main.go, content: "package main"}]}
  - error: {status: 429, message: slow down, retry_after_ms: 5}
  - text: late
    delay_ms: 30
`

func TestScriptedReplies(t *testing.T) {
	m, err := scripted.Parse("test.yaml", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Unstepped replies come in order; a stepped one only for its step.
	r, err := m.Generate(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hello there"}}})
	if err != nil || r.Message.Content != `{"company_name":"Acme","location":"Berlin","tags":["a","b"]}` || r.Usage.Input == 0 {
		t.Fatalf("json reply: %+v %v", r, err)
	}
	r, err = m.Generate(ctx, agent.Request{Step: "company_name"})
	if err != nil || r.Message.Content != "Acme GmbH" {
		t.Fatalf("stepped reply: %+v %v", r, err)
	}
	r, err = m.Generate(ctx, agent.Request{})
	if err != nil || len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].Name != "write_files" || !strings.Contains(string(r.Message.ToolCalls[0].Args), `"filename":"main.go"`) {
		t.Fatalf("tool calls: %+v %v", r, err)
	}
	_, err = m.Generate(ctx, agent.Request{})
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, agent.ErrRateLimited) || pe.Status != 429 || pe.RetryAfter != 5*time.Millisecond || !agent.Retryable(err) {
		t.Fatalf("error reply: %v", err)
	}
	start := time.Now()
	r, err = m.Generate(ctx, agent.Request{})
	if err != nil || r.Message.Content != "late" || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("delayed reply: %+v %v", r, err)
	}
	_, err = m.Generate(ctx, agent.Request{Step: "nothing"})
	if !errors.Is(err, agent.ErrScriptDone) || !strings.Contains(err.Error(), "test.yaml") {
		t.Fatalf("exhausted: %v", err)
	}
}

func TestScriptErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not yaml", "replies: [", "test.yaml"},
		{"no replies", "other: 1", `test.yaml:1: unknown key "other"`},
		{"replies not list", "replies: 3", "must be a list"},
		{"two kinds", "replies:\n  - text: a\n    json: 1\n", "test.yaml:2: a reply needs exactly one"},
		{"no kind", "replies:\n  - step: x\n", "test.yaml:2: a reply needs exactly one"},
		{"unknown field", "replies:\n  - text: a\n    colour: red\n", `test.yaml:3: unknown key "colour"`},
		{"tool without name", "replies:\n  - tool_calls: [{args: {}}]\n", "needs a name"},
		{"error without status", "replies:\n  - error: {message: x}\n", "needs a status"},
		{"negative chunk_chars", "replies:\n  - text: a\n    chunk_chars: -1\n", "test.yaml:2: delay_ms, chunk_delay_ms, chunk_chars and pad_to must not be negative"},
	}
	for _, tc := range tests {
		_, err := scripted.Parse("test.yaml", []byte(tc.in))
		if !errors.Is(err, scripted.ErrScript) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", tc.name, err, tc.want)
		}
	}
	if _, err := scripted.Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, scripted.ErrScript) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := scripted.Load(p); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: any script either parses or fails with ErrScript, never panics.
func FuzzParse(f *testing.F) {
	f.Add(script)
	f.Add("replies:\n  - text: [1, 2]\n")
	f.Add("replies:\n  - json: !!binary aGVsbG8=\n")
	f.Add("replies:\n  - echo_user: 'You said: {user}.'\n    user: hi\n    pad_to: 30\n    repeat: true\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := scripted.Parse("fuzz.yaml", []byte(s))
		if err != nil {
			if !errors.Is(err, scripted.ErrScript) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for i := 0; i < 3; i++ {
			_, _ = m.Generate(context.Background(), agent.Request{})
		}
	})
}

// TestEchoTool: an echo_tool reply answers what the last tool returned;
// without a tool result it is a malformed reply.
func TestEchoTool(t *testing.T) {
	m, err := scripted.Parse("echo.yaml", []byte("replies:\n  - tool_calls: [{name: look, args: {q: tea}}]\n  - echo_tool: true\n  - echo_tool: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	look, err := agent.NewTool("look", "", func(_ context.Context, _ agent.ToolContext, a struct {
		Q string `json:"q"`
	}) (any, error) {
		return map[string]string{"found": a.Q + " with milk"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "?"}}}, []agent.Tool{look}, agent.LoopOptions{})
	if err != nil || res.Final.Content != `{"found":"tea with milk"}` {
		t.Fatalf("echo: %q, %v", res.Final.Content, err)
	}
	if _, err := m.Generate(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "?"}}}); !errors.Is(err, agent.ErrMalformed) {
		t.Fatalf("echo without a tool result: %v", err)
	}
	if _, err := scripted.Parse("x.yaml", []byte("replies:\n  - echo_tool: true\n    text: a\n")); !errors.Is(err, scripted.ErrScript) {
		t.Fatalf("echo_tool with text: %v", err)
	}
}

// TestStreamPieces: a streamed reply comes word by word, or chunk_chars
// characters at a time (never half a character), each piece
// chunk_delay_ms after the one before, the first too.
func TestStreamPieces(t *testing.T) {
	tests := []struct {
		name, reply string
		want        []string
	}{
		{"word by word", `{text: "Grüße aus Köln"}`, []string{"Grüße ", "aus ", "Köln"}},
		{"three characters", `{text: "Grüße aus Köln", chunk_chars: 3}`, []string{"Grü", "ße ", "aus", " Kö", "ln"}},
		{"paced", `{text: "a b", chunk_delay_ms: 20}`, []string{"a ", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := scripted.Parse("s.yaml", []byte("replies: ["+tc.reply+"]"))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var got []string
			var first time.Duration
			resp, err := m.GenerateStream(context.Background(), agent.Request{}, func(c agent.Chunk) {
				if got = append(got, c.Text); len(got) == 1 {
					first = time.Since(start)
				}
			})
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || resp.Message.Content != strings.Join(tc.want, "") {
				t.Fatalf("pieces %q, reply %q, %v", got, resp.Message.Content, err)
			}
			if strings.Contains(tc.reply, "delay") && first < 20*time.Millisecond {
				t.Fatalf("first piece after %s", first)
			}
		})
	}
}
