package scripted

import (
	"context"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent"
)

// chunkSize is the size of the pieces a streamed tool call's arguments
// come in.
const chunkSize = 16

// GenerateStream implements agent.StreamingModel: the reply Generate would
// give, sent word by word (tool calls: their arguments in pieces), each
// chunk chunk_delay_ms after the one before.
func (m *Model) GenerateStream(ctx context.Context, req agent.Request, onChunk func(agent.Chunk)) (agent.Response, error) {
	resp, r, err := m.respond(ctx, req)
	if err != nil {
		return resp, err
	}
	delay := time.Duration(r.ChunkDelayMS) * time.Millisecond
	for _, c := range chunks(resp.Message) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return agent.Response{}, ctx.Err()
			}
		}
		onChunk(c)
	}
	return resp, nil
}

// chunks splits a reply: its text after each space, then each tool call,
// its ID and name with the first piece of its arguments.
func chunks(msg agent.Message) []agent.Chunk {
	var out []agent.Chunk
	for _, w := range strings.SplitAfter(msg.Content, " ") {
		if w != "" {
			out = append(out, agent.Chunk{Text: w})
		}
	}
	for i, tc := range msg.ToolCalls {
		args := string(tc.Args)
		first := true
		for first || args != "" {
			n := min(chunkSize, len(args))
			c := &agent.ToolCallChunk{Index: i, Args: args[:n]}
			if first {
				c.ID, c.Name = tc.ID, tc.Name
			}
			out = append(out, agent.Chunk{ToolCall: c})
			args, first = args[n:], false
		}
	}
	return out
}
