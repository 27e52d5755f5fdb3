package mcptools_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/mcptools"
	"github.com/cairn-dev/cairn/model/scripted"
)

type lookupArgs struct {
	Article string `json:"article"`
}

type stock struct {
	Count int `json:"count"`
}

// Connect to an MCP server over streamable HTTP and let a model call its
// tool in a tool loop. (The server, written with the official Go SDK,
// runs in this process for the example; a stdio server is
// mcptools.Server{Name: …, Command: "./bin/server", Args: …}.)
func ExampleConnect() {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "warehouse"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Stock of an article"},
		func(ctx context.Context, req *mcp.CallToolRequest, a lookupArgs) (*mcp.CallToolResult, stock, error) {
			return nil, stock{Count: 7}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	c, err := mcptools.Connect(ctx, mcptools.Server{Name: "stock", URL: hs.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	tools, err := c.Tools()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tools[0].Name)

	m, _ := scripted.Parse("replies.yaml", []byte(`replies:
  - tool_calls: [{name: stock__lookup, args: {article: A-17}}]
  - text: "7 in stock"
`))
	res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "How many A-17?"}}}, tools, agent.LoopOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.ToolResults[0].Output))
	fmt.Println(res.Final.Content)
	// Output:
	// stock__lookup
	// {"count":7}
	// 7 in stock
}
