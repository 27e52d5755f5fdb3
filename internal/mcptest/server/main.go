// Command server is the MCP server Cairn's tests run: written with the
// official Go SDK, it serves over stdio (the default) or streamable HTTP
// (-http ADDR, printing "listening URL" once it accepts connections), with
// the tools
//
//	echo {text}            the text back
//	add {a, b}             {"sum": a+b}, as structured content
//	slow {ms, text}        the text after ms milliseconds
//	fail {message}         a tool error (isError) carrying the message
//	record {note, ms}      appends "note key" to the -calls file, key being
//	                       the idempotency key in the call's _meta, then
//	                       waits ms milliseconds before answering
//	exit {}                ends the server process in the middle of the call
//	env {name}             the value of an environment variable
//
// With MCPTEST_KEY set, every HTTP request must carry "Authorization:
// Bearer $MCPTEST_KEY" (401 otherwise).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyMeta is the _meta member Cairn puts a call's idempotency key in.
const keyMeta = "dev.cairn/idempotency-key"

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	calls := flag.String("calls", "", "the file the record tool appends to")
	flag.Parse()
	s := newServer(*calls)
	var err error
	if *httpAddr == "" {
		err = s.Run(context.Background(), &mcp.StdioTransport{})
	} else {
		err = serveHTTP(s, *httpAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest server:", err)
		os.Exit(1)
	}
}

type textArgs struct {
	Text string `json:"text"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type sum struct {
	Sum float64 `json:"sum"`
}

type slowArgs struct {
	MS   int    `json:"ms"`
	Text string `json:"text"`
}

type failArgs struct {
	Message string `json:"message"`
}

type recordArgs struct {
	Note string `json:"note"`
	MS   int    `json:"ms,omitempty"`
}

type envArgs struct {
	Name string `json:"name"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newServer(callsFile string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "cairn-mcptest", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns the text"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		return text(a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers"}, func(ctx context.Context, req *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, sum, error) {
		return nil, sum{Sum: a.A + a.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Returns the text after ms milliseconds"}, func(ctx context.Context, req *mcp.CallToolRequest, a slowArgs) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return text(a.Text), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with the message"}, func(ctx context.Context, req *mcp.CallToolRequest, a failArgs) (*mcp.CallToolResult, any, error) {
		r := text(a.Message)
		r.IsError = true
		return r, nil, nil
	})
	var mu sync.Mutex
	mcp.AddTool(s, &mcp.Tool{Name: "record", Description: "Records the note in the calls file"}, func(ctx context.Context, req *mcp.CallToolRequest, a recordArgs) (*mcp.CallToolResult, any, error) {
		key, _ := req.Params.Meta[keyMeta].(string)
		if err := appendLine(&mu, callsFile, a.Note+" "+key); err != nil {
			return nil, nil, err
		}
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return text("recorded " + a.Note), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Ends the server in the middle of the call"}, func(ctx context.Context, req *mcp.CallToolRequest, a struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns an environment variable"}, func(ctx context.Context, req *mcp.CallToolRequest, a envArgs) (*mcp.CallToolResult, any, error) {
		return text(os.Getenv(a.Name)), nil, nil
	})
	return s
}

// appendLine appends a line to a file.
func appendLine(mu *sync.Mutex, path, line string) error {
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serveHTTP serves s over streamable HTTP at /mcp, checking the bearer key
// when MCPTEST_KEY is set.
func serveHTTP(s *mcp.Server, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	key := os.Getenv("MCPTEST_KEY")
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	return http.Serve(ln, mux)
}
