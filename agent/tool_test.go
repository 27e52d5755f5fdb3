package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
)

type file struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
}

type writeFilesArgs struct {
	Files []file `json:"files"`
}

// writeFiles is seed 004's tool: it keeps the files in the key-value store.
func writeFiles(t *testing.T) agent.Tool {
	tool, err := agent.NewTool("write_files", "Write code with the given filenames",
		func(ctx context.Context, tc agent.ToolContext, args writeFilesArgs) (any, error) {
			files := map[string]string{}
			if _, err := tc.KV.Get("files", &files); err != nil {
				return nil, err
			}
			for _, f := range args.Files {
				files[f.Filename] = f.Content
			}
			if err := tc.KV.Set("files", files); err != nil {
				return nil, err
			}
			return map[string]any{"written": len(args.Files), "key": tc.Key}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestToolLoop(t *testing.T) {
	m, err := scripted.Parse("coder.yaml", []byte(`replies:
  - tool_calls:
      - name: write_files
        args: {files: [{filename: main.go, content: "package main"}]}
      - name: delete_everything
        args: {}
  - tool_calls:
      - name: write_files
        args: {files: "not a list"}
  - tool_calls:
      - name: failing
  - text: "Done: main.go is written."
`))
	if err != nil {
		t.Fatal(err)
	}
	failing := agent.Tool{Name: "failing", Handler: func(context.Context, agent.ToolContext, json.RawMessage) (any, error) {
		return nil, errors.New("disk full")
	}}
	kv := state.NewKV(state.EmptyDoc())
	res, err := agent.RunTools(context.Background(), m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "write a program"}}},
		[]agent.Tool{writeFiles(t), failing}, agent.LoopOptions{Context: agent.ToolContext{KV: kv, Key: "t/3/coder"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Final.Content != "Done: main.go is written." || len(res.Responses) != 4 {
		t.Fatalf("final %+v after %d calls", res.Final, len(res.Responses))
	}
	if len(res.ToolResults) != 4 {
		t.Fatalf("tool results %+v", res.ToolResults)
	}
	if !strings.Contains(string(res.ToolResults[0].Output), `"key":"t/3/coder/tool/0.0"`) {
		t.Fatalf("idempotency key not handed to the tool: %s", res.ToolResults[0].Output)
	}
	for i, want := range []string{"", "unknown tool", "/files", "disk full"} {
		if !strings.Contains(res.ToolResults[i].Error, want) {
			t.Errorf("tool result %d error %q, want %q", i, res.ToolResults[i].Error, want)
		}
	}
	// Tool messages answer each call in order.
	roles := ""
	for _, msg := range res.Messages {
		roles += string(msg.Role)[:1]
	}
	if roles != "attatata" {
		t.Fatalf("message roles %s", roles)
	}
	var files map[string]string
	if ok, err := kv.Get("files", &files); !ok || err != nil || files["main.go"] != "package main" {
		t.Fatalf("kv files %v %v %v", files, ok, err)
	}
	if res.Usage.Input == 0 || res.Usage.Output == 0 {
		t.Fatalf("usage %+v", res.Usage)
	}
}

func TestToolLoopLimit(t *testing.T) {
	m, _ := scripted.Parse("loop.yaml", []byte("replies:\n  - tool_calls: [{name: noop}]\n  - tool_calls: [{name: noop}]\n  - tool_calls: [{name: noop}]\n"))
	noop := agent.Tool{Name: "noop", Handler: func(context.Context, agent.ToolContext, json.RawMessage) (any, error) { return "ok", nil }}
	res, err := agent.RunTools(context.Background(), m, agent.Request{}, []agent.Tool{noop}, agent.LoopOptions{MaxIterations: 2})
	if !errors.Is(err, agent.ErrToolLimit) || len(res.Responses) != 2 {
		t.Fatalf("limit: %v after %d", err, len(res.Responses))
	}
}

func TestRetryWrapper(t *testing.T) {
	m, _ := scripted.Parse("flaky.yaml", []byte("replies:\n  - error: {status: 503, message: busy}\n  - error: {status: 429, message: slow, retry_after_ms: 20}\n  - text: fine\n"))
	r := agent.WithRetry(m, agent.RetryPolicy{Attempts: 3, Initial: 1e6})
	resp, err := r.Generate(context.Background(), agent.Request{})
	if err != nil || resp.Message.Content != "fine" {
		t.Fatalf("retry: %+v %v", resp, err)
	}
	m2, _ := scripted.Parse("auth.yaml", []byte("replies:\n  - error: {status: 401, message: bad key}\n  - text: never\n"))
	_, err = agent.WithRetry(m2, agent.RetryPolicy{Attempts: 3}).Generate(context.Background(), agent.Request{})
	if !errors.Is(err, agent.ErrAuth) || agent.Retryable(err) {
		t.Fatalf("auth: %v", err)
	}
}
