package agent

import (
	"context"
	"encoding/json"
	"time"
)

// Role of a message.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message. It is stored in state as JSON, so its shape
// is the shape of the messages field (state.Message is compatible).
type Message struct {
	ID         string     `json:"id,omitempty"`
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments
}

// Usage counts tokens.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Add returns the sum.
func (u Usage) Add(o Usage) Usage {
	return Usage{Input: u.Input + o.Input, Output: u.Output + o.Output}
}

// Request is one model call.
type Request struct {
	Messages []Message
	Tools    []ToolSpec
	// Schema asks for JSON output that validates against it (providers use
	// their JSON-schema response format when they have one).
	Schema *Schema
	// Step names the step the call is for; the scripted model matches its
	// replies by it.
	Step        string
	MaxTokens   int
	Temperature *float64
}

// Response is a model's answer.
type Response struct {
	Message Message // role assistant: content and/or tool calls
	Usage   Usage
	Model   string
	Latency time.Duration
	Raw     json.RawMessage // the provider's body, for the record
}

// Model generates a response. Implementations are safe for concurrent use
// and return *ProviderError (wrapping this package's sentinels) on failure.
type Model interface {
	Generate(ctx context.Context, req Request) (Response, error)
}

// InferenceResult is one agent turn, as AgentKit records it: which agent,
// its input, the prompt (the whole message list of the turn's first model
// call: system prompt and history) and the history sent, the output messages, the tool
// results, and the raw response; plus token usage. (Latency is on each
// Response and in the checkpoint's timings, not here, so that a resumed
// run's state is byte-identical to an uninterrupted one.)
type InferenceResult struct {
	Agent     string          `json:"agent"`
	Input     string          `json:"input"`
	Prompt    []Message       `json:"prompt"`
	History   []Message       `json:"history"`
	Output    []Message       `json:"output"`
	ToolCalls []ToolResult    `json:"tool_calls"`
	Raw       json.RawMessage `json:"raw,omitempty"`
	Usage     Usage           `json:"usage"`
}

// ToolResult is the outcome of one tool call, sent back to the model.
type ToolResult struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}
