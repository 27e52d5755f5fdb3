package model_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model"
)

// Providers register when their package is imported (here in the test
// file's imports); a model opens by provider name, or from a spec as the
// CLI's --model takes it.
func Example() {
	dir, _ := os.MkdirTemp("", "model")
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "replies.yaml")
	os.WriteFile(script, []byte("replies:\n  - text: Hello from the script\n"), 0o644)

	models := model.Defaults()
	fmt.Println(models.Names())
	cfg, err := models.ParseSpec("scripted:" + script)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := models.Open(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	fmt.Println(resp.Message.Content, err)
	_, err = models.ParseSpec("magic:v1")
	fmt.Println(err)
	// Output:
	// [anthropic openai-compatible scripted]
	// Hello from the script <nil>
	// model: unknown provider "magic" (registered: anthropic, openai-compatible, scripted)
}
