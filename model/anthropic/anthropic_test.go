package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/anthropic"
)

const key = "sk-ant-test-SECRET-42"

func server(t *testing.T, handle func(w http.ResponseWriter, body map[string]any)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected path "+r.URL.Path, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Api-Key") != key {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+r.Header.Get("X-Api-Key")+`"}}`)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		handle(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func model(t *testing.T, url, k string) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New(anthropic.Config{BaseURL: url, Model: "claude-test", Timeout: 3 * time.Second, // generous: the machine may be loaded
		Getenv: func(string) string { return k }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolUse(t *testing.T) {
	var got map[string]any
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		got = body
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","stop_reason":"tool_use","stop_sequence":null,
			"content":[{"type":"text","text":"I'll write it."},{"type":"tool_use","id":"toolu_1","name":"write_files","input":{"files":[{"filename":"a.go","content":"package a"}]}}],
			"usage":{"input_tokens":30,"output_tokens":12}}`)
	})
	schema, _ := agent.SchemaFromJSON("out", []byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`))
	resp, err := model(t, srv.URL, key).Generate(context.Background(), agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: "You write code."},
			{Role: agent.RoleUser, Content: "write it"},
			{Role: agent.RoleAssistant, Content: "calling", ToolCalls: []agent.ToolCall{{ID: "toolu_0", Name: "write_files", Args: json.RawMessage(`{"files":[]}`)}, {ID: "toolu_00", Name: "list", Args: json.RawMessage(`{}`)}}},
			{Role: agent.RoleTool, ToolCallID: "toolu_0", Content: `{"written":0}`},
			{Role: agent.RoleTool, ToolCallID: "toolu_00", Content: "error: no such dir"},
		},
		Tools:  []agent.ToolSpec{{Name: "write_files", Description: "Write files", Parameters: json.RawMessage(`{"type":"object","properties":{"files":{"type":"array"}},"required":["files"]}`)}},
		Schema: schema,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "I'll write it." || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "toolu_1" ||
		!strings.Contains(string(resp.Message.ToolCalls[0].Args), "a.go") || resp.Usage != (agent.Usage{Input: 30, Output: 12}) {
		t.Fatalf("response %+v", resp)
	}
	sys := got["system"].([]any)
	msgs := got["messages"].([]any)
	if sys[0].(map[string]any)["text"] != "You write code." || len(msgs) != 3 {
		t.Fatalf("system %v messages %v", sys, msgs)
	}
	asst := msgs[1].(map[string]any)["content"].([]any)
	if asst[1].(map[string]any)["type"] != "tool_use" || asst[1].(map[string]any)["id"] != "toolu_0" {
		t.Fatalf("assistant blocks %v", asst)
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	if len(results) != 2 || results[0].(map[string]any)["tool_use_id"] != "toolu_0" || results[1].(map[string]any)["is_error"] != true {
		t.Fatalf("tool results %v", results)
	}
	tool := got["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "write_files" || tool["input_schema"].(map[string]any)["required"].([]any)[0] != "files" {
		t.Fatalf("tools %v", tool)
	}
	if got["output_config"].(map[string]any)["format"].(map[string]any)["type"] != "json_schema" || got["max_tokens"] != float64(1024) {
		t.Fatalf("params %v", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		delay  time.Duration
		want   error
		retry  time.Duration
	}{
		{"not found", 404, nil, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`, 0, agent.ErrModelNotFound, 0},
		{"rate limited", 429, map[string]string{"Retry-After": "3"}, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, 0, agent.ErrRateLimited, 3 * time.Second},
		{"prompt too long", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, 0, agent.ErrContextOverflow, 0},
		{"context limit", 400, nil, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000\"}}", 0, agent.ErrContextOverflow, 0},
		{"request too large", 413, nil, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, 0, agent.ErrContextOverflow, 0},
		{"other bad request", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"}}`, 0, agent.ErrBadRequest, 0},
		{"overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, agent.ErrServer, 0},
		{"malformed", 200, nil, `{"content": [ nope`, 0, agent.ErrMalformed, 0},
		{"timeout", 200, nil, `{}`, 4 * time.Second, agent.ErrTimeout, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, func(w http.ResponseWriter, body map[string]any) {
				time.Sleep(tc.delay)
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := model(t, srv.URL, key).Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
			var pe *agent.ProviderError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.RetryAfter != tc.retry || strings.Contains(err.Error(), key) {
				t.Fatalf("err = %v (%+v), want %v", err, pe, tc.want)
			}
		})
	}
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {})
	_, err := model(t, srv.URL, "sk-ant-wrong-77777").Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	if !errors.Is(err, agent.ErrAuth) || strings.Contains(err.Error(), "sk-ant-wrong-77777") {
		t.Fatalf("auth: %v", err)
	}
	if _, err := anthropic.New(anthropic.Config{Model: "m", Getenv: func(string) string { return "" }}); !errors.Is(err, anthropic.ErrConfig) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("missing key: %v", err)
	}
}
