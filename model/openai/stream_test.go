package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
)

// sse writes chat completion chunks as the server's event stream.
func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func chunk(delta string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

func TestGenerateStream(t *testing.T) {
	var sawStream, sawUsage bool
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		sawStream = body["stream"] == true
		so, _ := body["stream_options"].(map[string]any)
		sawUsage = so["include_usage"] == true
		sse(w,
			chunk(`{"role":"assistant","content":"Acme "}`),
			chunk(`{"content":"GmbH, Berlin."}`),
			chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"sku\":"}}]}`),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"A-17\"}"}}]}`),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`,
		)
	})
	m := model(t, srv.URL, key)
	var text, args strings.Builder
	var names []string
	resp, err := m.GenerateStream(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "who?"}}}, func(c agent.Chunk) {
		text.WriteString(c.Text)
		if c.ToolCall != nil {
			args.WriteString(c.ToolCall.Args)
			if c.ToolCall.Name != "" {
				names = append(names, c.ToolCall.Name)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawStream || !sawUsage {
		t.Fatalf("request: stream %v, include_usage %v", sawStream, sawUsage)
	}
	if text.String() != "Acme GmbH, Berlin." || args.String() != `{"sku":"A-17"}` || len(names) != 1 {
		t.Fatalf("chunks: text %q args %q names %v", text.String(), args.String(), names)
	}
	msg := resp.Message
	if msg.Content != "Acme GmbH, Berlin." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_1" || string(msg.ToolCalls[0].Args) != `{"sku":"A-17"}` {
		t.Fatalf("response %+v", msg)
	}
	if resp.Usage != (agent.Usage{Input: 11, Output: 7}) || resp.Model != "gpt-test" || len(resp.Raw) == 0 {
		t.Fatalf("usage %+v model %q", resp.Usage, resp.Model)
	}
}

// A failing status before the stream starts is the same typed error as
// Generate's, without the key.
func TestGenerateStreamErrors(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
		fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	})
	_, err := model(t, srv.URL, key).GenerateStream(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}}, func(agent.Chunk) {
		t.Error("a chunk from a refused request")
	})
	var pe *agent.ProviderError
	if !errors.Is(err, agent.ErrRateLimited) || !errors.As(err, &pe) || pe.RetryAfter == 0 || strings.Contains(err.Error(), key) {
		t.Fatalf("err = %v", err)
	}
}
