package anthropic

import (
	"context"
	"encoding/json"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/cairn-dev/cairn/agent"
)

// GenerateStream implements agent.StreamingModel: the Messages API's
// streaming events; text deltas and tool-use input deltas go to onChunk as
// they arrive; the response is the accumulated message, as Generate's.
func (m *Model) GenerateStream(ctx context.Context, req agent.Request, onChunk func(agent.Chunk)) (agent.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	stream := m.client.Messages.NewStreaming(cctx, params)
	defer stream.Close()
	var out sdk.Message
	tools := map[int64]int{} // content block index → tool call index
	for stream.Next() {
		ev := stream.Current()
		if err := out.Accumulate(ev); err != nil {
			return agent.Response{}, &agent.ProviderError{Provider: "anthropic", Err: agent.ErrMalformed, Message: err.Error()}
		}
		if c, ok := chunkOf(ev, tools); ok {
			onChunk(c)
		}
	}
	if err := stream.Err(); err != nil {
		return agent.Response{}, m.wrap(ctx, err)
	}
	raw, _ := json.Marshal(out) // an SDK message always marshals
	return agent.Response{Message: messageOf(&out), Model: string(out.Model), Latency: time.Since(start), Raw: raw,
		Usage: agent.Usage{Input: out.Usage.InputTokens, Output: out.Usage.OutputTokens}}, nil
}

// chunkOf reads the piece of the reply a streaming event carries: a text
// delta, a tool call's start (its ID and name) or a delta of its input.
func chunkOf(ev sdk.MessageStreamEventUnion, tools map[int64]int) (agent.Chunk, bool) {
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			n := len(tools)
			tools[ev.Index] = n
			return agent.Chunk{ToolCall: &agent.ToolCallChunk{Index: n, ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}}, true
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			return agent.Chunk{Text: ev.Delta.Text}, ev.Delta.Text != ""
		case "input_json_delta":
			if n, ok := tools[ev.Index]; ok {
				return agent.Chunk{ToolCall: &agent.ToolCallChunk{Index: n, Args: ev.Delta.PartialJSON}}, ev.Delta.PartialJSON != ""
			}
		}
	}
	return agent.Chunk{}, false
}
