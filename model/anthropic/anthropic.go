package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/internal/httperr"
)

// Config configures the model.
type Config struct {
	BaseURL     string // empty: Anthropic's API
	APIKeyEnv   string // default ANTHROPIC_API_KEY
	Model       string
	Temperature *float64
	MaxTokens   int           // default 1024 (the API requires one)
	Timeout     time.Duration // per call (default 120s)
	HTTPClient  *http.Client
	Getenv      func(string) string
}

// ErrConfig: the configuration is incomplete.
var ErrConfig = errors.New("anthropic: invalid configuration")

// Model is an Anthropic chat model.
type Model struct {
	cfg    Config
	key    string
	client sdk.Client
}

// New returns a model.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("%w: model name is required", ErrConfig)
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = defaultKeyEnv
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 1024
	}
	key := cfg.Getenv(cfg.APIKeyEnv)
	if key == "" {
		return nil, fmt.Errorf("%w: environment variable %s is empty", ErrConfig, cfg.APIKeyEnv)
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Model{cfg: cfg, key: key, client: sdk.NewClient(opts...)}, nil
}

// Generate implements agent.Model.
func (m *Model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	out, err := m.client.Messages.New(cctx, params)
	if err != nil {
		return agent.Response{}, m.wrap(ctx, err)
	}
	return agent.Response{Message: messageOf(out), Model: string(out.Model), Latency: time.Since(start), Raw: json.RawMessage(out.RawJSON()),
		Usage: agent.Usage{Input: out.Usage.InputTokens, Output: out.Usage.OutputTokens}}, nil
}

// params builds the Messages API request.
func (m *Model) params(req agent.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{Model: sdk.Model(m.cfg.Model), MaxTokens: int64(max(req.MaxTokens, m.cfg.MaxTokens))}
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	for _, msg := range req.Messages {
		if err := addMessage(&params, msg); err != nil {
			return params, err
		}
	}
	for _, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	if req.Schema != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Schema.JSON, &schema); err != nil {
			return params, fmt.Errorf("%w: schema: %v", agent.ErrBadRequest, err)
		}
		params.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: schema}}
	}
	if t := req.Temperature; t != nil {
		params.Temperature = sdk.Float(*t)
	} else if m.cfg.Temperature != nil {
		params.Temperature = sdk.Float(*m.cfg.Temperature)
	}
	return params, nil
}

// addMessage adds a message to the request: system messages to the system
// prompt, tool results (consecutive ones in one user turn) as user turns.
func addMessage(params *sdk.MessageNewParams, msg agent.Message) error {
	switch msg.Role {
	case agent.RoleSystem:
		params.System = append(params.System, sdk.TextBlockParam{Text: msg.Content})
	case agent.RoleUser:
		params.Messages = append(params.Messages, sdk.NewUserMessage(sdk.NewTextBlock(msg.Content)))
	case agent.RoleAssistant:
		var blocks []sdk.ContentBlockParamUnion
		if msg.Content != "" {
			blocks = append(blocks, sdk.NewTextBlock(msg.Content))
		}
		for _, tc := range msg.ToolCalls {
			var input any = map[string]any{}
			if len(tc.Args) > 0 {
				if err := json.Unmarshal(tc.Args, &input); err != nil {
					return fmt.Errorf("%w: tool call %s args: %v", agent.ErrBadRequest, tc.ID, err)
				}
			}
			blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, input, tc.Name))
		}
		params.Messages = append(params.Messages, sdk.NewAssistantMessage(blocks...))
	case agent.RoleTool:
		isErr := strings.HasPrefix(msg.Content, "error: ")
		block := sdk.NewToolResultBlock(msg.ToolCallID, msg.Content, isErr)
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == sdk.MessageParamRoleUser && hasToolResult(params.Messages[n-1]) {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, block)
		} else {
			params.Messages = append(params.Messages, sdk.NewUserMessage(block))
		}
	default:
		return fmt.Errorf("%w: unknown message role %q", agent.ErrBadRequest, msg.Role)
	}
	return nil
}

// toolParam turns a tool's JSON Schema into Anthropic's input schema.
func toolParam(t agent.ToolSpec) (sdk.ToolParam, error) {
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return sdk.ToolParam{}, fmt.Errorf("%w: tool %q parameters: %v", agent.ErrBadRequest, t.Name, err)
	}
	in := sdk.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				in.Required = append(in.Required, s)
			}
		}
	}
	for k, v := range schema {
		if k != "properties" && k != "required" && k != "type" {
			in.ExtraFields[k] = v
		}
	}
	tp := sdk.ToolParam{Name: t.Name, InputSchema: in}
	if t.Description != "" {
		tp.Description = sdk.String(t.Description)
	}
	return tp, nil
}

// messageOf reads the reply: its text blocks joined, its tool calls.
func messageOf(out *sdk.Message) agent.Message {
	msg := agent.Message{Role: agent.RoleAssistant}
	var text []string
	for _, b := range out.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	msg.Content = strings.Join(text, "")
	return msg
}

func hasToolResult(p sdk.MessageParam) bool {
	for _, c := range p.Content {
		if c.OfToolResult != nil {
			return true
		}
	}
	return false
}

// wrap turns SDK and transport errors into typed provider errors.
func (m *Model) wrap(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		retry := ""
		if apiErr.Response != nil {
			retry = apiErr.Response.Header.Get("Retry-After")
		}
		msg := providerMessage(apiErr.RawJSON())
		pe := httperr.Status("anthropic", apiErr.StatusCode, msg, retry)
		if contextOverflow(apiErr.StatusCode, msg) {
			pe.Err = agent.ErrContextOverflow
		}
		return pe.Redact(m.key)
	}
	if ce, ok := httperr.Call(ctx, "anthropic", err, m.cfg.Timeout).(*agent.ProviderError); ok {
		return ce.Redact(m.key)
	}
	return ctx.Err()
}

// contextOverflow reports whether an error says the prompt exceeds the
// context window. Anthropic gives such errors no code of their own (an
// invalid_request_error), only their wording: "prompt is too long: N
// tokens > M maximum", or "input length and `max_tokens` exceed context
// limit"; a 413 request_too_large is a request over the size limit.
func contextOverflow(status int, msg string) bool {
	if status == 413 {
		return true
	}
	msg = strings.ToLower(msg)
	return status == 400 && (strings.HasPrefix(msg, "prompt is too long") || strings.Contains(msg, "exceed context limit"))
}

// providerMessage reads {"error":{"message":...}} from an error body.
func providerMessage(raw string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) == nil {
		return body.Error.Message
	}
	return ""
}

var _ agent.Model = (*Model)(nil)
