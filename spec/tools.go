package spec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cairn-dev/cairn/agent"
)

// Built-in tools an agent file can list under tools:. Every path is
// confined to the agent's safe directory.
var builtinTools = map[string]func(a *AgentFile) (agent.Tool, error){
	"read_file": func(a *AgentFile) (agent.Tool, error) {
		type args struct {
			Path string `json:"path"`
		}
		return agent.NewTool("read_file", "Read a text file (path relative to the working directory)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			p, err := a.resolve(x.Path)
			if err != nil {
				return nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %v", x.Path, err)
			}
			return string(b), nil
		})
	},
	"write_file": func(a *AgentFile) (agent.Tool, error) {
		type args struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		return agent.NewTool("write_file", "Write a text file (path relative to the working directory)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			p, err := a.resolve(x.Path)
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, []byte(x.Content), 0o644); err != nil {
				return nil, err
			}
			return map[string]any{"written": x.Path, "bytes": len(x.Content)}, nil
		})
	},
	"list_files": func(a *AgentFile) (agent.Tool, error) {
		type args struct {
			Dir string `json:"dir"`
		}
		return agent.NewTool("list_files", "List the files of a directory (relative to the working directory)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			if x.Dir == "" {
				x.Dir = "."
			}
			p, err := a.resolve(x.Dir)
			if err != nil {
				return nil, err
			}
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("list %s: %v", x.Dir, err)
			}
			names := []string{}
			for _, e := range entries {
				n := e.Name()
				if e.IsDir() {
					n += "/"
				}
				names = append(names, n)
			}
			sort.Strings(names)
			return names, nil
		})
	},
}

// BuiltinTools lists the tool names agent files may use.
func BuiltinTools() []string {
	out := make([]string, 0, len(builtinTools))
	for n := range builtinTools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// tools builds the agent's tools.
func (a *AgentFile) tools() ([]agent.Tool, error) {
	var out []agent.Tool
	for _, name := range a.Tools {
		mk := builtinTools[name]
		if mk == nil {
			return nil, &SpecError{File: a.Path, Msg: fmt.Sprintf("unknown tool %q (built-in tools: %v)", name, BuiltinTools())}
		}
		t, err := mk(a)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
