package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/anthropic"
)

// The Messages API; BaseURL points at Anthropic by default. Here a local
// server answers in its wire format.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","stop_reason":"end_turn","stop_sequence":null,"content":[{"type":"text","text":"Berlin"}],"usage":{"input_tokens":12,"output_tokens":1}}`)
	}))
	defer srv.Close()
	m, err := anthropic.New(anthropic.Config{
		BaseURL: srv.URL,
		Model:   "claude-test",
		Getenv:  func(string) string { return "not-a-real-key" },
	})
	if err != nil {
		panic(err)
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: "Answer with one word."},
		{Role: agent.RoleUser, Content: "Where is Acme Anvils?"},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Content, resp.Usage.Input, resp.Usage.Output)
	// Output: Berlin 12 1
}
