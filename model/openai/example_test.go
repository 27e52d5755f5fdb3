package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/openai"
)

// Any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) through
// BaseURL; the key comes from an environment variable. Here a local
// server answers as such a server would.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"local-model","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Berlin"}}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`)
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{
		BaseURL:   srv.URL + "/v1",
		Model:     "local-model",
		APIKeyEnv: "LOCAL_KEY",
		Getenv:    func(string) string { return "not-a-real-key" },
	})
	if err != nil {
		panic(err)
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Where is Acme Anvils?"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Content, resp.Usage.Input, resp.Usage.Output)
	// Output: Berlin 12 1
}
