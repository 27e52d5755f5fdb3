package agent

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn/flow"
	"go.opentelemetry.io/otel/attribute"
)

// Chunk is a piece of a model's reply as it arrives: a text delta, or a
// delta of a tool call's arguments.
type Chunk struct {
	Text     string         `json:"text,omitempty"`
	ToolCall *ToolCallChunk `json:"tool_call,omitempty"`
}

// ToolCallChunk is a delta of tool call Index: its ID and Name come with
// its first chunk, Args is the next piece of the JSON arguments.
type ToolCallChunk struct {
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
	Name  string `json:"name,omitempty"`
	Args  string `json:"args,omitempty"`
}

// StreamingModel is a Model that can send its reply as it arrives.
// GenerateStream calls onChunk for each piece, in order, from the calling
// goroutine, and returns the complete response, as Generate would.
type StreamingModel interface {
	Model
	GenerateStream(ctx context.Context, req Request, onChunk func(Chunk)) (Response, error)
}

// MessageChunk is what a flow stream in messages mode receives: a chunk
// of the reply of one model call. ID names the call — the task's
// idempotency key and the call within the task ("thread/seq/node/model/0"
// for the first call of a tool loop), the same for every chunk of one
// reply and when the step runs again; Agent is the calling agent, if any.
type MessageChunk struct {
	ID    string `json:"id"`
	Agent string `json:"agent,omitempty"`
	Chunk
}

// Generate calls m from a flow node: when the node's run is streamed in
// messages mode and m streams, the reply goes to the stream as it arrives
// (MessageChunk, ID "<task key>/model"); when the run redacts, its text
// goes through the run's redactor stream (redact.Stream: each piece as
// soon as it cannot become part of a secret) and its tool calls go whole
// once the reply ends. The complete response is returned either way.
// Count its tokens with flow.AddTokens as for any call.
func Generate(ctx context.Context, m Model, req Request) (Response, error) {
	return generateRecorded(ctx, m, req, "", "model")
}

// generate calls the model. When the running flow task's run is streamed
// in messages mode and the model streams, its chunks go to the stream as
// they arrive; the response is the complete one either way, and it is
// what the step commits. call names the call within the task.
func generate(ctx context.Context, m Model, req Request, agentName, call string) (resp Response, err error) {
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("cairn.call", call)}
	if p, ok := m.(interface{ Provider() string }); ok {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", p.Provider()))
	}
	if agentName != "" {
		attrs = append(attrs, attribute.String("gen_ai.agent.name", agentName))
	}
	name := "chat"
	if n, ok := m.(interface{ ModelName() string }); ok && n.ModelName() != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", n.ModelName()))
		name += " " + n.ModelName()
	}
	ctx, span := startSpan(ctx, name, attrs...)
	defer func() { modelSpan(span, resp, err) }()
	if redact, ok := flow.CaptureContent(ctx); ok {
		in, _ := json.Marshal(req.Messages) // messages always encode
		span.SetAttributes(attribute.String("gen_ai.input.messages", string(redact(in))))
		defer func() {
			out, _ := json.Marshal([]Message{resp.Message})
			span.SetAttributes(attribute.String("gen_ai.output.messages", string(redact(out))))
		}()
	}
	sm, ok := m.(StreamingModel)
	if !ok || !flow.Streaming(ctx, flow.StreamMessages) {
		return m.Generate(ctx, req)
	}
	info, _ := flow.Info(ctx)
	id := info.Key + "/" + call
	send := func(c Chunk) {
		_ = flow.EmitMessage(ctx, MessageChunk{ID: id, Agent: agentName, Chunk: c}) // a Chunk always encodes
	}
	rd := flow.Redactor(ctx)
	if rd == nil {
		return sm.GenerateStream(ctx, req, send)
	}
	// The run hides secrets: text goes through the redactor's stream,
	// which sends each piece as soon as it cannot be part of a secret;
	// tool calls go whole, once the reply ends, redacted like any event.
	text := rd.Stream()
	var calls toolCallBuffer
	resp, err = sm.GenerateStream(ctx, req, func(c Chunk) {
		if c.ToolCall != nil {
			calls.add(*c.ToolCall)
		}
		if safe := text.Write(c.Text); safe != "" {
			send(Chunk{Text: safe})
		}
	})
	if rest := text.Flush(); rest != "" && err == nil {
		send(Chunk{Text: rest}) // a failed reply's held-back end may begin a secret
	}
	calls.flush(send)
	return resp, err
}

// toolCallBuffer holds streamed tool calls until the reply ends.
type toolCallBuffer struct {
	calls []ToolCallChunk
}

func (b *toolCallBuffer) add(tc ToolCallChunk) {
	for len(b.calls) <= tc.Index {
		b.calls = append(b.calls, ToolCallChunk{Index: len(b.calls)})
	}
	call := &b.calls[tc.Index]
	call.ID, call.Name = cmp.Or(tc.ID, call.ID), cmp.Or(tc.Name, call.Name)
	call.Args += tc.Args
}

func (b *toolCallBuffer) flush(send func(Chunk)) {
	for i := range b.calls {
		send(Chunk{ToolCall: &b.calls[i]})
	}
}

// sendWhole sends a complete reply as chunks: its text, then each tool
// call whole.
func sendWhole(msg Message, onChunk func(Chunk)) {
	if msg.Content != "" {
		onChunk(Chunk{Text: msg.Content})
	}
	for i, tc := range msg.ToolCalls {
		onChunk(Chunk{ToolCall: &ToolCallChunk{Index: i, ID: tc.ID, Name: tc.Name, Args: string(tc.Args)}})
	}
}
