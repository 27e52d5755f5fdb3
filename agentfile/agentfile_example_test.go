package agentfile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// An agent file runs on a thread: checked first (Check; Run makes
// the same checks before it stores anything), then one committed checkpoint
// per step, the output file written inside the safe directory, and
// secrets redacted before anything is stored.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "replies.yaml"), []byte("replies:\n  - text: \"Hello! Your password: hunter2hunter2\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "greeter.md"), []byte(`---
name: greeter
model: {provider: scripted, script: replies.yaml}
output: {format: markdown, file: out/greeting.md}
---
## Instructions
Greet the user.
`), 0o644)
	a, err := agentfile.Load(filepath.Join(dir, "greeter.md"))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "t1", Input: agentfile.TextInput("inline", "Ada"),
		NewThread: map[string]any{"kind": "agent"}}
	if err := agentfile.Check(a, cfg); err != nil {
		fmt.Println(err)
		return
	}
	res, err := agentfile.Run(context.Background(), a, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := os.ReadFile(res.OutputFile)
	fmt.Println(res.Result.StopReason, res.Result.Head)
	fmt.Println(string(out))
	// Output:
	// success 2
	// Hello! Your password: [REDACTED]
}
