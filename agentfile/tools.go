package agentfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/internal/readfile"
)

// confinement is where an agent file may touch files: its safe directory,
// opened as an os.Root inside the directory the command line allows. Every
// file operation of an agent file (tools, output.file, the scripted model's
// script, schema files, handoff files) goes through root, so a symbolic link
// swapped in after a check, or a dangling one pointing out, cannot escape.
type confinement struct {
	base string   // real absolute folder of the agent file: its paths are relative to it
	safe string   // real absolute safe directory
	root *os.Root // opened at safe
}

// realDir returns the absolute path of dir with symbolic links resolved.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within returns p relative to dir when p is dir or below it.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
		return "", false
	}
	return rel, true
}

// confine opens the agent file's safe directory (safe_dir, relative to the
// agent file; its own folder when unset) inside allowed, the directory the
// user allows (allowedPath, its real path). A safe_dir outside it is refused.
func confine(a *File, allowed *os.Root, allowedPath string) (*confinement, error) {
	base, err := realDir(a.Dir())
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: err.Error(), Err: err}
	}
	safe := base
	if a.SafeDir != "" {
		safe = a.SafeDir
		if !filepath.IsAbs(safe) {
			safe = filepath.Join(base, safe)
		}
		if safe, err = realDir(safe); err != nil {
			return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("safe_dir %q: %v", a.SafeDir, err), Err: err}
		}
	}
	rel, ok := within(allowedPath, safe)
	if !ok {
		return nil, &FileError{File: a.Path, Err: ErrUnsafePath,
			Msg: fmt.Sprintf("safe_dir %s is outside %s, the directory this run allows (allow more with --safe-dir DIR)", safe, allowedPath)}
	}
	root, err := allowed.OpenRoot(rel)
	if err != nil {
		return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("safe_dir %s: %v", safe, err), Err: ErrUnsafePath}
	}
	return &confinement{base: base, safe: safe, root: root}, nil
}

// rel maps p (relative to the agent file, or absolute) to a path inside the
// safe directory, or fails with ErrUnsafePath.
func (c *confinement) rel(p string) (string, error) {
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(c.base, p)
	}
	r, ok := within(c.safe, filepath.Clean(abs))
	if !ok {
		return "", fmt.Errorf("%w: %s is outside %s", ErrUnsafePath, p, c.safe)
	}
	return r, nil
}

// abs is the absolute path of a path inside the safe directory, for messages.
func (c *confinement) abs(rel string) string { return filepath.Join(c.safe, rel) }

// readFile reads p inside the safe directory.
func (c *confinement) readFile(p string) ([]byte, error) {
	rel, err := c.rel(p)
	if err != nil {
		return nil, err
	}
	b, err := readfile.FromRoot(c.root, rel)
	return b, err
}

// writeFile writes p inside the safe directory, creating its folders.
func (c *confinement) writeFile(p string, data []byte) error {
	rel, err := c.rel(p)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := c.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return c.root.WriteFile(rel, data, 0o644)
}

// checkWritable fails when p is outside the safe directory or is a symbolic
// link leading out of it, so a run is refused before it starts.
func (c *confinement) checkWritable(p string) error {
	rel, err := c.rel(p)
	if err != nil {
		return err
	}
	fi, err := c.root.Lstat(rel)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil // missing (created later) or a plain file
	}
	if _, err := c.root.Stat(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s is a symbolic link that cannot be followed inside %s: %v", ErrUnsafePath, p, c.safe, err)
	}
	return nil
}

func (c *confinement) close() {
	if c != nil && c.root != nil {
		c.root.Close()
	}
}

// Built-in tools an agent file can list under tools:. Every path is
// confined to the agent's safe directory.
var builtinTools = map[string]func(c *confinement) (agent.Tool, error){
	"read_file": func(c *confinement) (agent.Tool, error) {
		type args struct {
			Path string `json:"path"`
		}
		return agent.NewTool("read_file", "Read a text file (path relative to the agent file's folder)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			b, err := c.readFile(x.Path)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", x.Path, err)
			}
			return string(b), nil
		})
	},
	"write_file": func(c *confinement) (agent.Tool, error) {
		type args struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		return agent.NewTool("write_file", "Write a text file (path relative to the agent file's folder)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			if err := c.writeFile(x.Path, []byte(x.Content)); err != nil {
				return nil, fmt.Errorf("write %s: %w", x.Path, err)
			}
			return map[string]any{"written": x.Path, "bytes": len(x.Content)}, nil
		})
	},
	"list_files": func(c *confinement) (agent.Tool, error) {
		type args struct {
			Dir string `json:"dir"`
		}
		return agent.NewTool("list_files", "List the files of a directory (relative to the agent file's folder)", func(ctx context.Context, tc agent.ToolContext, x args) (any, error) {
			if x.Dir == "" {
				x.Dir = "."
			}
			names, err := c.list(x.Dir)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", x.Dir, err)
			}
			return names, nil
		})
	},
}

// list names the entries of a directory inside the safe directory, folders
// with a trailing slash.
func (c *confinement) list(dir string) ([]string, error) {
	rel, err := c.rel(dir)
	if err != nil {
		return nil, err
	}
	f, err := c.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
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
}

// BuiltinTools lists the tool names agent files may use.
func BuiltinTools() []string {
	out := make([]string, 0, len(builtinTools)+len(memoryTools))
	for n := range builtinTools {
		out = append(out, n)
	}
	for n := range memoryTools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// tools builds the agent's tools, confined by c: built-ins by name, the
// Go program's own (extra), and "<server>.<tool>" entries from the
// connected MCP servers (mcp). A Go tool cannot replace a built-in.
func (a *File) tools(c *confinement, extra []agent.Tool, mcp *mcpTools) ([]agent.Tool, error) {
	byName := map[string]agent.Tool{}
	for _, t := range extra {
		if builtinTools[t.Name] != nil || memoryTools[t.Name] != nil {
			return nil, &FileError{File: a.Path, Msg: fmt.Sprintf("tool %q is built in: a Go tool cannot replace it; give it another name", t.Name), Err: ErrToolName}
		}
		byName[t.Name] = t
	}
	var out []agent.Tool
	for _, name := range a.Tools {
		if mcp != nil && mcp.tools[name] != nil {
			out = append(out, mcp.tools[name]...)
			continue
		}
		if mk := builtinTools[name]; mk != nil {
			t, err := mk(c)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			continue
		}
		if mk := memoryTools[name]; mk != nil {
			t, err := mk(a)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			continue
		}
		t, ok := byName[name]
		if !ok {
			return nil, &FileError{File: a.Path, Line: a.toolLine, Msg: fmt.Sprintf("unknown tool %q (built-in tools: %v%s)", name, BuiltinTools(), goTools(byName)), Err: ErrToolName}
		}
		out = append(out, t)
	}
	return out, nil
}

// ErrToolName: an agent file names a tool that is neither built in nor
// given by the program, or a program's tool takes a built-in's name.
var ErrToolName = errors.New("agentfile: unknown or reserved tool name")

// goTools lists the program's tools for an error message.
func goTools(extra map[string]agent.Tool) string {
	if len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("; the program's: %v", slices.Sorted(maps.Keys(extra)))
}
