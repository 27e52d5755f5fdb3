package scripted

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/agent"
)

// chunkSize is the size of the pieces a streamed tool call's arguments
// come in.
const chunkSize = 16

// GenerateStream implements agent.StreamingModel: the reply Generate would
// give, sent word by word or chunk_chars characters at a time (tool calls:
// their arguments in pieces), each chunk chunk_delay_ms after the one
// before (the first too: a paced reply's first token comes after one
// delay).
func (m *Model) GenerateStream(ctx context.Context, req agent.Request, onChunk func(agent.Chunk)) (agent.Response, error) {
	resp, r, err := m.respond(ctx, req)
	if err != nil {
		return resp, err
	}
	delay := time.Duration(r.ChunkDelayMS) * time.Millisecond
	for _, c := range chunks(resp.Message, r.ChunkChars) {
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

// chunks splits a reply: its text after each space (or every n
// characters), then each tool call, its ID and name with the first piece
// of its arguments.
func chunks(msg agent.Message, n int) []agent.Chunk {
	var out []agent.Chunk
	for _, w := range textPieces(msg.Content, n) {
		out = append(out, agent.Chunk{Text: w})
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

// textPieces cuts text after each space, or every n characters when n > 0.
func textPieces(text string, n int) []string {
	var out []string
	if n <= 0 {
		for _, w := range strings.SplitAfter(text, " ") {
			if w != "" {
				out = append(out, w)
			}
		}
		return out
	}
	for text != "" {
		end, count := 0, 0
		for end < len(text) && count < n {
			_, w := utf8.DecodeRuneInString(text[end:])
			end, count = end+w, count+1
		}
		out = append(out, text[:end])
		text = text[end:]
	}
	return out
}
