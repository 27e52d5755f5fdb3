package agentfile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// houseModel is a Go program's own model: it asks for the "lookup" tool,
// then answers with what the tool returned.
type houseModel struct{}

func (houseModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		var stock string
		_ = json.Unmarshal([]byte(last.Content), &stock)
		return agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "In stock: " + stock}}, nil
	}
	return agent.Response{Message: agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: "c1", Name: "lookup", Args: json.RawMessage(`{"sku":"A-17"}`)}}}}, nil
}

// houseProvider makes houseModel available as model.provider: house.
type houseProvider struct{}

func (houseProvider) Open(context.Context, model.Config) (agent.Model, error) {
	return houseModel{}, nil
}
func (houseProvider) KeyEnv() string { return "" }
func (houseProvider) ParseSpec(rest string) (model.Config, error) {
	return model.Config{Model: rest}, nil
}
func (houseProvider) FormatSpec(c model.Config) string { return c.Model }

// A Go program hands its own tools and model providers to agent files: the
// file names them (tools: [lookup], model.provider: house) like the
// built-in ones.
func ExampleRunConfig_goToolsAndModels() {
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "clerk.md"), []byte(`---
name: clerk
model: {provider: house, model_name: v1}
tools: [lookup]
---
## Instructions
Is A-17 in stock?
`), 0o644)
	lookup, _ := agent.NewTool("lookup", "Stock of an article", func(ctx context.Context, tc agent.ToolContext, args struct {
		SKU string `json:"sku"`
	}) (any, error) {
		return strings.ToLower(args.SKU) + ": 12 units", nil
	})
	models := model.Defaults() // the built-in providers, plus ours
	models.Register("house", houseProvider{})

	a, err := agentfile.Load(filepath.Join(dir, "clerk.md"))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "t1",
		Input: agentfile.TextInput("inline", "A-17"), Models: models, Tools: []agent.Tool{lookup}, NewThread: map[string]any{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.FinalOutput))
	// Output: "In stock: a-17: 12 units"
}
