package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
)

// events writes Messages API streaming events.
func events(w http.ResponseWriter, evs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range evs {
		typ := e[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, e)
		w.(http.Flusher).Flush()
	}
}

func TestGenerateStream(t *testing.T) {
	var sawStream bool
	srv := server(t, func(w http.ResponseWriter, body map[string]any) {
		sawStream = body["stream"] == true
		events(w,
			`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll "}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"write it."}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"write_files","input":{}}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"files\":"}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"[]}"}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`,
			`{"type":"message_stop"}`,
		)
	})
	var text, args strings.Builder
	var names []string
	resp, err := model(t, srv.URL, key).GenerateStream(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "code"}}}, func(c agent.Chunk) {
		text.WriteString(c.Text)
		if c.ToolCall != nil {
			args.WriteString(c.ToolCall.Args)
			if c.ToolCall.Name != "" {
				names = append(names, c.ToolCall.Name+"/"+c.ToolCall.ID)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawStream || text.String() != "I'll write it." || args.String() != `{"files":[]}` || len(names) != 1 || names[0] != "write_files/toolu_1" {
		t.Fatalf("stream %v: text %q args %q names %v", sawStream, text.String(), args.String(), names)
	}
	msg := resp.Message
	if msg.Content != "I'll write it." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Name != "write_files" || !strings.Contains(string(msg.ToolCalls[0].Args), `"files"`) {
		t.Fatalf("response %+v", msg)
	}
	if resp.Usage.Input != 30 || resp.Usage.Output != 12 || resp.Model != "claude-test" {
		t.Fatalf("usage %+v model %q", resp.Usage, resp.Model)
	}
}
