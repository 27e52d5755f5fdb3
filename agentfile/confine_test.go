package agentfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func loadAgent(t *testing.T, path string) *agentfile.File {
	t.Helper()
	a, err := agentfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestCheckAgentRefusesUpFront: every reason a run cannot finish is found
// before the first step, and Run stores nothing for it.
func TestCheckAgentRefusesUpFront(t *testing.T) {
	const replies = "replies:\n  - text: hi\n"
	tests := []struct {
		name  string
		front string
		files map[string]string
		want  string
		is    error
	}{
		{"output outside the safe dir", "model: {provider: scripted, script: r.yaml}\noutput: {file: ../out.txt}", nil, "output.file", agentfile.ErrUnsafePath},
		{"absolute output outside", "model: {provider: scripted, script: r.yaml}\noutput: {file: /tmp/cairn-escape.txt}", nil, "output.file", agentfile.ErrUnsafePath},
		{"missing script", "model: {provider: scripted, script: nope.yaml}", nil, "model.script", nil},
		{"script outside", "model: {provider: scripted, script: ../r.yaml}", nil, "model.script", agentfile.ErrUnsafePath},
		{"bad script", "model: {provider: scripted, script: bad.yaml}", map[string]string{"bad.yaml": "replies: 3\n"}, "model.script", nil},
		{"missing schema file", "model: {provider: scripted, script: r.yaml}\nchain: [{id: a, kind: structured, output_schema: S}]\nschemas: {S: nope.json}", nil, `schema "S"`, nil},
		{"invalid schema", "model: {provider: scripted, script: r.yaml}\nchain: [{id: a, kind: structured, output_schema: S}]\nschemas: {S: s.json}", map[string]string{"s.json": `{"type": 12}`}, `schema "S"`, nil},
		{"empty key variable", "model: {provider: openai-compatible, base_url: 'http://127.0.0.1:1/v1', api_key_env: CAIRN_TEST_NO_SUCH_KEY, model_name: m}", nil, "CAIRN_TEST_NO_SUCH_KEY", agentfile.ErrMissingKey},
		{"missing OpenAI key", "model: {provider: openai-compatible, model_name: gpt-4o}", nil, "OPENAI_API_KEY", nil},
		{"missing Anthropic key", "model: {provider: anthropic, model_name: claude}", nil, "ANTHROPIC_API_KEY", nil},
		{"unknown handoff", "model: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: ghost.md}", nil, "ghost.md", nil},
		{"handoff outside", "model: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: ../next.md}", nil, "handoff.agent_id", agentfile.ErrUnsafePath},
		{"bad handoff file", "model: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: next}", map[string]string{"next.md": "---\nname: n\ncolour: red\n---\n## Instructions\nx\n"}, "next.md:3", nil},
		{"handoff loop", "model: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: a.md}", nil, "comes back", nil},
		{"safe_dir above the allowed dir", "model: {provider: scripted, script: r.yaml}\nsafe_dir: ..", nil, "--safe-dir", agentfile.ErrUnsafePath},
		{"safe_dir root", "model: {provider: scripted, script: r.yaml}\nsafe_dir: /", nil, "--safe-dir", agentfile.ErrUnsafePath},
		{"unknown provider", "model: {provider: magic}", nil, `model.provider: model: unknown provider "magic"`, model.ErrUnknownProvider},
		{"unknown tool", "model: {provider: scripted, script: r.yaml}\ntools: [shell]", nil, `a.md:4: unknown tool "shell"`, agentfile.ErrToolName},
		{"bad secrets pattern", "model: {provider: scripted, script: r.yaml}\nsecrets: {patterns: ['(']}", nil, "secrets", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "agents")
			files := map[string]string{"r.yaml": replies, "a.md": "---\nname: a\n" + tc.front + "\n---\n## Instructions\nsay hi\n## step:a\nx\n"}
			for k, v := range tc.files {
				files[k] = v
			}
			writeFiles(t, dir, files)
			writeFiles(t, filepath.Dir(dir), map[string]string{"r.yaml": replies, "next.md": "---\nname: n\n---\n## Instructions\nx\n"})
			a, err := agentfile.Load(filepath.Join(dir, "a.md"))
			if err != nil {
				if strings.Contains(err.Error(), tc.want) {
					return // refused when loading: earlier still
				}
				t.Fatal(err)
			}
			getenv := func(string) string { return "" }
			err = agentfile.Check(a, agentfile.RunConfig{Getenv: getenv})
			var se *agentfile.FileError
			if !errors.As(err, &se) || !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Check: %v; want a FileError with %q (%v)", err, tc.want, tc.is)
			}
			s := inmem.Open(store.Options{})
			_, err = agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "t", Getenv: getenv, NewThread: map[string]any{"kind": "agent"}})
			if !errors.Is(err, agentfile.ErrInvalidFile) {
				t.Fatalf("Run: %v", err)
			}
			if _, err := s.Thread(context.Background(), "t"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused run left a thread: %v", err)
			}
			if _, err := os.Stat("/tmp/cairn-escape.txt"); err == nil {
				t.Fatal("wrote outside")
			}
		})
	}
}

// TestSafeDirAllowedRoot: an agent file's safe_dir may narrow or, when the
// user allows a wider directory, reach up to it; never beyond.
func TestSafeDirAllowedRoot(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "agents")
	writeFiles(t, top, map[string]string{"r.yaml": "replies:\n  - text: hi\n"})
	writeFiles(t, dir, map[string]string{"a.md": "---\nname: a\nmodel: {provider: scripted, script: ../r.yaml}\nsafe_dir: ..\noutput: {file: ../out/a.txt}\n---\n## Instructions\nx\n"})
	a := loadAgent(t, filepath.Join(dir, "a.md"))
	if err := agentfile.Check(a, agentfile.RunConfig{}); !errors.Is(err, agentfile.ErrUnsafePath) {
		t.Fatalf("default allowed dir: %v", err)
	}
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "t", AllowedRoot: top})
	if err != nil || res.OutputFile != filepath.Join(mustReal(t, top), "out", "a.txt") {
		t.Fatalf("allowed wider: %+v %v", res, err)
	}
	if err := agentfile.Check(a, agentfile.RunConfig{AllowedRoot: dir}); !errors.Is(err, agentfile.ErrUnsafePath) {
		t.Fatalf("allowed narrower: %v", err)
	}
}

func mustReal(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSymlinksCannotEscape: a symbolic link inside the safe directory that
// leads out of it (dangling or not, present at the check or swapped in
// after it) lets no tool, output file or script read or write outside.
func TestSymlinksCannotEscape(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.txt": "top secret", "r.yaml": "replies:\n  - text: hi\n"})
	tests := []struct {
		name    string
		front   string
		replies string
		links   map[string]string // name in the safe dir → target
		swap    map[string]string // links made after Check, before the run
		refused bool              // Check refuses
	}{
		{name: "output through a dangling link", front: "output: {file: out.txt}", links: map[string]string{"out.txt": filepath.Join(outside, "made.txt")}, refused: true},
		{name: "output swapped in after the check", front: "output: {file: out.txt}", swap: map[string]string{"out.txt": filepath.Join(outside, "made.txt")}},
		{name: "output folder swapped in after the check", front: "output: {file: sub/out.txt}", swap: map[string]string{"sub": outside}},
		{name: "write_file through a dangling link", front: "tools: [write_file]",
			replies: "  - tool_calls: [{name: write_file, args: {path: w.txt, content: pwned}}]\n  - text: done\n",
			links:   map[string]string{"w.txt": filepath.Join(outside, "made.txt")}},
		{name: "write_file through a linked folder", front: "tools: [write_file]",
			replies: "  - tool_calls: [{name: write_file, args: {path: d/made.txt, content: pwned}}]\n  - text: done\n",
			links:   map[string]string{"d": outside}},
		{name: "read_file through a link", front: "tools: [read_file]",
			replies: "  - tool_calls: [{name: read_file, args: {path: s.txt}}]\n  - text: done\n",
			links:   map[string]string{"s.txt": filepath.Join(outside, "secret.txt")}},
		{name: "list_files through a link", front: "tools: [list_files]",
			replies: "  - tool_calls: [{name: list_files, args: {dir: d}}]\n  - text: done\n",
			links:   map[string]string{"d": outside}},
		{name: "script through a link", front: "", links: map[string]string{"r.yaml": filepath.Join(outside, "r.yaml")}, refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			replies := "replies:\n" + tc.replies
			if tc.replies == "" {
				replies += "  - text: hi\n"
			}
			files := map[string]string{"a.md": "---\nname: a\nmodel: {provider: scripted, script: r.yaml}\n" + tc.front + "\n---\n## Instructions\nx\n"}
			if tc.links["r.yaml"] == "" {
				files["r.yaml"] = replies
			}
			writeFiles(t, dir, files)
			for name, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			a := loadAgent(t, filepath.Join(dir, "a.md"))
			err := agentfile.Check(a, agentfile.RunConfig{})
			if tc.refused {
				if !errors.Is(err, agentfile.ErrUnsafePath) && !errors.Is(err, agentfile.ErrInvalidFile) {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			for name, target := range tc.swap {
				os.RemoveAll(filepath.Join(dir, name))
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			s := inmem.Open(store.Options{})
			res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "t"})
			if _, serr := os.Stat(filepath.Join(outside, "made.txt")); serr == nil {
				t.Fatalf("wrote outside the safe dir (run: %v)", err)
			}
			if res != nil && strings.Contains(string(res.FinalOutput), "top secret") {
				t.Fatal("read outside")
			}
			// What the tool saw is in the store: never the outside file.
			cp, lerr := s.Load(context.Background(), store.LoadRequest{Thread: "t"})
			if lerr == nil {
				b, _ := json.Marshal(cp.State)
				if strings.Contains(string(b), "top secret") || strings.Contains(string(b), "secret.txt") {
					t.Fatalf("outside content reached the state: %s", b)
				}
			}
			if len(tc.swap) > 0 && !errors.Is(err, agentfile.ErrInvalidFile) {
				t.Fatalf("output through a swapped link: %v", err)
			}
		})
	}
}

// TestRerunOnThreadStartsFresh: a second run on the same thread sees a
// fresh chain state, never the previous run's steps; the history keeps both.
func TestRerunOnThreadStartsFresh(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"r.yaml": "replies:\n  - text: one\n    step: first\n  - text: two\n    step: second\n  - text: three\n    step: first\n  - text: four\n    step: second\n",
		"a.md":   "---\nname: a\nmodel: {provider: scripted, script: r.yaml}\nchain: [{id: first, kind: text}, {id: second, kind: text}]\n---\n## step:first\nx\n## step:second\ny\n",
	})
	a := loadAgent(t, filepath.Join(dir, "a.md"))
	s := inmem.Open(store.Options{})
	ctx := context.Background()
	model, err := scripted.Load(filepath.Join(dir, "r.yaml")) // one script across both runs
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: "t", Model: model, Input: agentfile.TextInput("inline", "run 1")}); err != nil {
		t.Fatal(err)
	}
	res, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: "t", Model: model, Input: agentfile.TextInput("inline", "run 2")})
	if err != nil || string(res.FinalOutput) != `"four"` {
		t.Fatalf("second run: %+v %v", res, err)
	}
	// The second run's first step was checkpoint 5 (after 1 input + 2
	// steps, and its own input): the state it read had no steps.
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: 4})
	if err != nil {
		t.Fatal(err)
	}
	var steps map[string]string
	if cp.State.Has("steps") {
		if err := cp.State.Get("steps", &steps); err != nil {
			t.Fatal(err)
		}
	}
	fo, _ := cp.State.Raw("final_output")
	if len(steps) != 0 || (len(fo) > 0 && string(fo) != "null") {
		t.Fatalf("second run's input checkpoint carries the first run: steps %v, final_output %s", steps, fo)
	}
	first, err := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fo, _ := first.State.Raw("final_output"); string(fo) != `"two"` {
		t.Fatalf("history lost the first run: %s", fo)
	}
}

// TestLongChain: a chain longer than the runner's default step limit runs
// to its end (a chain is a line: it cannot loop).
func TestLongChain(t *testing.T) {
	dir := t.TempDir()
	var front, body, replies strings.Builder
	front.WriteString("---\nname: long\nmodel: {provider: scripted, script: r.yaml}\nchain:\n")
	replies.WriteString("replies:\n")
	for i := range 40 {
		fmt.Fprintf(&front, "  - {id: s%d, kind: text}\n", i)
		fmt.Fprintf(&body, "## step:s%d\nstep %d\n", i, i)
		fmt.Fprintf(&replies, "  - text: r%d\n", i)
	}
	writeFiles(t, dir, map[string]string{"a.md": front.String() + "---\n" + body.String(), "r.yaml": replies.String()})
	res, err := agentfile.Run(context.Background(), loadAgent(t, filepath.Join(dir, "a.md")), agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "t"})
	if err != nil || string(res.FinalOutput) != `"r39"` {
		t.Fatalf("%+v %v", res, err)
	}
}

// A Go tool cannot take a built-in's name; an agent file naming a tool the
// program did not give is refused before anything is stored.
func TestGoToolsChecked(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"r.yaml": "replies:\n  - text: hi\n",
		"a.md": "---\nname: a\nmodel: {provider: scripted, script: r.yaml}\ntools: [read_file, stock]\n---\n## Instructions\nx\n"})
	a, err := agentfile.Load(filepath.Join(dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string) agent.Tool {
		tl, err := agent.NewTool(name, "", func(context.Context, agent.ToolContext, struct{}) (any, error) { return "ok", nil })
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	for _, tc := range []struct {
		name  string
		tools []agent.Tool
		want  error
	}{
		{"given", []agent.Tool{tool("stock")}, nil},
		{"missing", nil, agentfile.ErrToolName},
		{"taking a built-in's name", []agent.Tool{tool("stock"), tool("read_file")}, agentfile.ErrToolName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := agentfile.Check(a, agentfile.RunConfig{Tools: tc.tools})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
}
