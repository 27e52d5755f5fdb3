package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/internal/httperr"
)

// Config configures the model.
type Config struct {
	BaseURL     string // e.g. http://localhost:11434/v1 for Ollama; empty: OpenAI
	APIKeyEnv   string // environment variable holding the key (default OPENAI_API_KEY)
	Model       string
	Temperature *float64
	MaxTokens   int
	Timeout     time.Duration // per call (default 120s)
	HTTPClient  *http.Client
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// Model is an OpenAI-compatible chat model.
type Model struct {
	cfg    Config
	key    string
	client sdk.Client
}

// ErrConfig: the configuration is incomplete.
var ErrConfig = errors.New("openai: invalid configuration")

// New returns a model. A key is required for OpenAI itself; a server at a
// custom BaseURL may do without one.
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
	key := cfg.Getenv(cfg.APIKeyEnv)
	if key == "" && cfg.BaseURL == "" {
		return nil, fmt.Errorf("%w: environment variable %s is empty", ErrConfig, cfg.APIKeyEnv)
	}
	if key == "" {
		key = "none"
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
	out, err := m.client.Chat.Completions.New(cctx, params)
	if err != nil {
		return agent.Response{}, m.wrap(ctx, err)
	}
	return responseOf(out, start)
}

// GenerateStream implements agent.StreamingModel: chat completions with
// stream: true (and the usage in the last chunk); each text and tool-call
// argument delta goes to onChunk as it arrives; the response is the
// accumulated completion, as Generate's.
func (m *Model) GenerateStream(ctx context.Context, req agent.Request, onChunk func(agent.Chunk)) (agent.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	stream := m.client.Chat.Completions.NewStreaming(cctx, params)
	defer stream.Close()
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" {
				onChunk(agent.Chunk{Text: c.Delta.Content})
			}
			for _, tc := range c.Delta.ToolCalls {
				onChunk(agent.Chunk{ToolCall: &agent.ToolCallChunk{Index: int(tc.Index), ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments}})
			}
		}
	}
	if err := stream.Err(); err != nil {
		return agent.Response{}, m.wrap(ctx, err)
	}
	return responseOf(&acc.ChatCompletion, start)
}

// params builds the chat completion request.
func (m *Model) params(req agent.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.Model)}
	for _, msg := range req.Messages {
		p, err := toParam(msg)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, p)
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return params, fmt.Errorf("%w: tool %q parameters: %v", agent.ErrBadRequest, t.Name, err)
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	if req.Schema != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Schema.JSON, &schema); err != nil {
			return params, fmt.Errorf("%w: schema: %v", agent.ErrBadRequest, err)
		}
		params.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: schemaName(req.Schema.Name), Schema: schema}}}
	}
	if t := req.Temperature; t != nil {
		params.Temperature = sdk.Float(*t)
	} else if m.cfg.Temperature != nil {
		params.Temperature = sdk.Float(*m.cfg.Temperature)
	}
	if n := max(req.MaxTokens, m.cfg.MaxTokens); n > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(n))
	}
	return params, nil
}

// responseOf reads a completion (whole, or accumulated from a stream).
func responseOf(out *sdk.ChatCompletion, start time.Time) (agent.Response, error) {
	if len(out.Choices) == 0 {
		return agent.Response{}, &agent.ProviderError{Provider: "openai", Err: agent.ErrMalformed, Message: "response has no choices"}
	}
	c := out.Choices[0].Message
	msg := agent.Message{Role: agent.RoleAssistant, Content: c.Content}
	for _, tc := range c.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			// The model's arguments are not JSON: hand them on as a string so
			// the tool's schema check reports it back to the model.
			b, _ := json.Marshal(tc.Function.Arguments) // a string always marshals
			args = b
		}
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	raw := json.RawMessage(out.RawJSON())
	if len(raw) == 0 { // accumulated from a stream: no body of its own
		raw, _ = json.Marshal(out)
	}
	return agent.Response{Message: msg, Model: out.Model, Latency: time.Since(start), Raw: raw,
		Usage: agent.Usage{Input: out.Usage.PromptTokens, Output: out.Usage.CompletionTokens}}, nil
}

func schemaName(n string) string {
	var b strings.Builder
	for _, r := range n {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "output"
	}
	return b.String()
}

func toParam(msg agent.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case agent.RoleSystem:
		return sdk.SystemMessage(msg.Content), nil
	case agent.RoleUser:
		return sdk.UserMessage(msg.Content), nil
	case agent.RoleTool:
		return sdk.ToolMessage(msg.Content, msg.ToolCallID), nil
	case agent.RoleAssistant:
		a := sdk.ChatCompletionAssistantMessageParam{}
		if msg.Content != "" {
			a.Content.OfString = sdk.String(msg.Content)
		}
		for _, tc := range msg.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID, Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Args)}}})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("%w: unknown message role %q", agent.ErrBadRequest, msg.Role)
}

// wrap turns SDK and transport errors into typed provider errors.
func (m *Model) wrap(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		retry := ""
		if apiErr.Response != nil {
			retry = apiErr.Response.Header.Get("Retry-After")
		}
		msg := apiErr.Message
		if msg == "" && apiErr.Response != nil && apiErr.Response.Body != nil {
			msg = topLevelMessage(apiErr.Response.Body)
		}
		pe := httperr.Status("openai", apiErr.StatusCode, msg, retry)
		if contextOverflow(apiErr, msg) {
			pe.Err = agent.ErrContextOverflow
		}
		return pe.Redact(m.key)
	}
	if ce, ok := httperr.Call(ctx, "openai", err, m.cfg.Timeout).(*agent.ProviderError); ok {
		return ce.Redact(m.key)
	}
	return ctx.Err()
}

// contextOverflow reports whether a 400 says the prompt exceeds the
// context window: OpenAI's code context_length_exceeded, llama.cpp's type
// exceed_context_size_error, and, for OpenAI-compatible servers that send
// no code (vLLM), the wording they share ("maximum context length").
func contextOverflow(e *sdk.Error, msg string) bool {
	if e.StatusCode != 400 && e.StatusCode != 413 {
		return false
	}
	if e.Code == "context_length_exceeded" || e.Type == "exceed_context_size_error" {
		return true
	}
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "maximum context length") || strings.Contains(msg, "context length exceeded") || strings.Contains(msg, "exceeds the available context size")
}

// topLevelMessage reads the message of an error body without the "error"
// wrapper ({"object":"error","message":...}, as vLLM sends). The SDK
// keeps the body readable on its error.
func topLevelMessage(r io.Reader) string {
	var body struct {
		Message string `json:"message"`
	}
	if json.NewDecoder(io.LimitReader(r, 1<<16)).Decode(&body) == nil {
		return body.Message
	}
	return ""
}

var _ agent.Model = (*Model)(nil)
