// Command coding-network is seed 004's AgentKit network on Cairn: a planner
// and a coder chosen by a code router; the coder's write_files tool keeps
// the files in the state's key-value store, so they are checkpointed with
// every step and survive a crash.
//
//	go run ./examples/coding-network
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

type file struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
}

type writeFilesArgs struct {
	Files []file `json:"files"`
}

// writeFiles is seed 004's tool: "Write code with the given filenames".
func writeFiles() (agent.Tool, error) {
	return agent.NewTool("write_files", "Write code with the given filenames",
		func(ctx context.Context, tc agent.ToolContext, args writeFilesArgs) (any, error) {
			files := map[string]string{}
			if _, err := tc.KV.Get("files", &files); err != nil {
				return nil, err
			}
			for _, f := range args.Files {
				files[f.Filename] = f.Content
			}
			return map[string]int{"written": len(args.Files)}, tc.KV.Set("files", files)
		})
}

// network builds the planner/coder network.
func network(model agent.Model) (*agent.Network, error) {
	wf, err := writeFiles()
	if err != nil {
		return nil, err
	}
	return &agent.Network{
		Name: "coding",
		Agents: []*agent.Agent{
			{Name: "planner", Description: "Plans the code", System: "You plan small Go programs.", Model: model},
			{Name: "coder", Description: "Writes the code", System: "You write Go code with the write_files tool.", Model: model, Tools: []agent.Tool{wf}},
		},
		// The code router: plan first, then code until files exist.
		Router: func(ctx context.Context, n agent.NetworkView) ([]string, error) {
			switch {
			case n.CallCount == 0:
				return []string{"planner"}, nil
			case n.KV.Has("files"):
				return nil, nil
			default:
				return []string{"coder"}, nil
			}
		},
	}, nil
}

func main() {
	storeURL := flag.String("store", envOr("CAIRN_STORE", sqlite.DefaultURL), "store URL")
	script := flag.String("script", "examples/coding-network/team.yaml", "scripted replies")
	outDir := flag.String("out", "", "also write the files here")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *storeURL, *script, *outDir); err != nil {
		fmt.Fprintln(os.Stderr, "coding-network:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, out io.Writer, storeURL, script, outDir string) error {
	model, err := scripted.Load(script)
	if err != nil {
		return err
	}
	n, err := network(model)
	if err != nil {
		return err
	}
	g, err := n.Graph(nil)
	if err != nil {
		return err
	}
	s, err := store.Open(context.Background(), storeURL, store.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		return err
	}
	thread := "coding-network"
	if _, err := s.Thread(ctx, thread); err == nil {
		thread = fmt.Sprintf("coding-network-%d", os.Getpid())
	}
	res, err := r.Invoke(ctx, thread, agent.Input("Write a Go program that prints a greeting"))
	if err != nil {
		return err
	}
	var results []agent.InferenceResult
	if err := res.State.Get(agent.FieldResults, &results); err != nil {
		return err
	}
	for _, ir := range results {
		fmt.Fprintf(out, "%s: %s (%d tool calls)\n", ir.Agent, ir.Output[len(ir.Output)-1].Content, len(ir.ToolCalls))
	}
	files := map[string]string{}
	if _, err := state.NewKV(res.State).Get("files", &files); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "files in kv: %v (thread %q, %d checkpoints)\n", names, thread, res.Head)
	if outDir != "" {
		for _, name := range names {
			p := filepath.Join(outDir, filepath.Base(name))
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
