package openai_test

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
	"github.com/cairn-dev/cairn/model/openai"
)

const key = "sk-test-SECRET-123456"

// server answers /chat/completions with the handler's body and status.
func server(t testing.TB, handle func(w http.ResponseWriter, body map[string]any)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "unexpected path "+r.URL.Path, 400)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		handle(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func model(t testing.TB, url string, env string) *openai.Model {
	t.Helper()
	m, err := openai.New(openai.Config{BaseURL: url + "/v1", Model: "gpt-test", APIKeyEnv: "TEST_KEY", Timeout: 3 * time.Second, // generous: the machine may be loaded
		Getenv: func(k string) string {
			if k == "TEST_KEY" {
				return env
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolCallsAndSchema(t *testing.T) {
	var got map[string]any
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		got = body
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_files","arguments":"{\"files\":[]}"}}]}}],
			"usage":{"prompt_tokens":42,"completion_tokens":7,"total_tokens":49}}`)
	})
	schema, err := agent.SchemaFromJSON("Business Summary", []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.2
	resp, err := model(t, srv.URL, key).Generate(context.Background(), agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: "You write code."},
			{Role: agent.RoleUser, Content: "write it"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_0", Name: "write_files", Args: json.RawMessage(`{"files":[]}`)}}},
			{Role: agent.RoleTool, ToolCallID: "call_0", Content: `{"written":0}`},
		},
		Tools:       []agent.ToolSpec{{Name: "write_files", Description: "Write files", Parameters: json.RawMessage(`{"type":"object","properties":{"files":{"type":"array"}}}`)}},
		Schema:      schema,
		Temperature: &temp,
		MaxTokens:   100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "write_files" || string(resp.Message.ToolCalls[0].Args) != `{"files":[]}` {
		t.Fatalf("tool calls %+v", resp.Message)
	}
	if resp.Usage != (agent.Usage{Input: 42, Output: 7}) || resp.Model != "gpt-test" || len(resp.Raw) == 0 {
		t.Fatalf("response %+v", resp)
	}
	// The request spoke the wire format.
	msgs := got["messages"].([]any)
	if len(msgs) != 4 || msgs[0].(map[string]any)["role"] != "system" || msgs[3].(map[string]any)["tool_call_id"] != "call_0" {
		t.Fatalf("messages %v", msgs)
	}
	if tc := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any); tc["function"].(map[string]any)["name"] != "write_files" {
		t.Fatalf("assistant tool call %v", tc)
	}
	tools := got["tools"].([]any)
	if tools[0].(map[string]any)["function"].(map[string]any)["name"] != "write_files" {
		t.Fatalf("tools %v", tools)
	}
	rf := got["response_format"].(map[string]any)
	if rf["type"] != "json_schema" || rf["json_schema"].(map[string]any)["name"] != "BusinessSummary" {
		t.Fatalf("response_format %v", rf)
	}
	if got["model"] != "gpt-test" || got["temperature"] != 0.2 || got["max_completion_tokens"] != float64(100) {
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
		{"not found", 404, nil, `{"error":{"message":"The model gpt-test does not exist","type":"invalid_request_error","code":"model_not_found"}}`, 0, agent.ErrModelNotFound, 0},
		{"rate limited", 429, map[string]string{"Retry-After": "2"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`, 0, agent.ErrRateLimited, 2 * time.Second},
		{"server", 503, nil, `{"error":{"message":"overloaded","type":"server_error"}}`, 0, agent.ErrServer, 0},
		{"context length", 400, nil, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 0, agent.ErrContextOverflow, 0},
		{"context length, vLLM", 400, nil, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`, 0, agent.ErrContextOverflow, 0},
		{"context size, llama.cpp", 400, nil, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`, 0, agent.ErrContextOverflow, 0},
		{"other bad request", 400, nil, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, 0, agent.ErrBadRequest, 0},
		{"malformed", 200, nil, `{"choices": [ this is not json`, 0, agent.ErrMalformed, 0},
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
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.RetryAfter != tc.retry {
				t.Fatalf("err = %v (%+v), want %v", err, pe, tc.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error leaks the key: %v", err)
			}
		})
	}
	// A wrong key: ErrAuth, and the provider's echo of the key is redacted.
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {})
	_, err := model(t, srv.URL, "sk-wrong-KEY-987654").Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	if !errors.Is(err, agent.ErrAuth) || strings.Contains(err.Error(), "sk-wrong-KEY-987654") || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("auth: %v", err)
	}
	if _, err := openai.New(openai.Config{Model: "m", Getenv: func(string) string { return "" }}); !errors.Is(err, openai.ErrConfig) || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := openai.New(openai.Config{}); !errors.Is(err, openai.ErrConfig) {
		t.Fatalf("missing model: %v", err)
	}
}

// The retry wrapper honours Retry-After from the server.
func TestRetryAfter(t *testing.T) {
	calls := 0
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "0.05")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
			return
		}
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	m := agent.WithRetry(model(t, srv.URL, key), agent.RetryPolicy{Attempts: 2, Initial: time.Millisecond})
	start := time.Now()
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	if err != nil || resp.Message.Content != "ok" || calls != 2 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("%+v %v after %d calls in %v", resp, err, calls, time.Since(start))
	}
}
