package agentfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

const good = `---
name: demo
model: {provider: scripted, script: replies.yaml}
chain:
  - id: one
    kind: text
  - id: two
    kind: structured
    output_schema: Out
schemas:
  Out: {type: object, required: [x], properties: {x: {type: integer}}}
---

## System prompt
Be brief.

## step:one
First.
### a sub-heading stays in step one

## step:two
Second.
`

func TestParseAgentFile(t *testing.T) {
	a, err := agentfile.Parse("demo.md", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "demo" || a.System != "Be brief." || !strings.Contains(a.Sections["step:one"], "sub-heading stays") || a.Sections["step:two"] != "Second." {
		t.Fatalf("parsed %+v", a)
	}
}

func TestAgentFileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no front matter", "# hi\n", "demo.md:1: an agent file starts with YAML front matter"},
		{"unclosed", "---\nname: x\n", "not closed"},
		{"bad yaml", "---\nname: [x\n---\n## Instructions\nx\n", "demo.md:"},
		{"unknown key", "---\nname: x\ncolour: red\n---\n## Instructions\nx\n", `demo.md:3: unknown front-matter key "colour"`},
		{"no name", "---\ndescription: x\n---\n## Instructions\nx\n", "name: is required"},
		{"unknown kind", "---\nname: x\nchain:\n  - id: a\n    kind: poem\n---\n## step:a\nx\n", `demo.md:4: step "a": unknown kind "poem"`},
		{"structured without schema", "---\nname: x\nchain:\n  - id: a\n    kind: structured\n---\n## step:a\nx\n", `demo.md:4: structured step "a" needs output_schema`},
		{"pause before an unknown step", "---\nname: x\nchain:\n  - {id: a, kind: text}\ninterrupt_before: [b]\n---\n## step:a\nx\n", `demo.md: interrupt_before: "b" is not a chain step`},
		{"bad approval timeout", "---\nname: x\nchain:\n  - {id: a, kind: text}\ninterrupt_before: [a]\napproval: {timeout: soon}\n---\n## step:a\nx\n", `approval.timeout "soon": want a positive duration`},
		{"bad approval fallback", "---\nname: x\nchain:\n  - {id: a, kind: text}\ninterrupt_before: [a]\napproval: {timeout: 1h, fallback: maybe}\n---\n## step:a\nx\n", `approval.fallback "maybe": want reject or approve`},
		{"timeout without a pause", "---\nname: x\nchain:\n  - {id: a, kind: text}\napproval: {timeout: 1h}\n---\n## step:a\nx\n", `approval.timeout needs interrupt_before`},
		{"unknown approval key", "---\nname: x\nchain:\n  - {id: a, kind: text}\napproval: {timeout: 1h, wait: 2}\n---\n## step:a\nx\n", `wait`},
		{"unknown schema", "---\nname: x\nchain:\n  - id: a\n    kind: structured\n    output_schema: Nope\n---\n## step:a\nx\n", `unknown schema "Nope"`},
		{"missing section", "---\nname: x\nchain:\n  - id: a\n    kind: text\n---\n## step:b\nx\n", `demo.md:4: step "a": no "## step:a" section`},
		{"empty chain without instructions", "---\nname: x\n---\n## System prompt\nx\n", `needs a "## Instructions" section`},
		{"bad handoff mode", "---\nname: x\nhandoff: {enabled: true, agent_id: y.md, input_mode: all}\n---\n## Instructions\nx\n", "input_mode"},
	}
	for _, tc := range tests {
		_, err := agentfile.Parse("demo.md", []byte(tc.src))
		var se *agentfile.FileError
		if !errors.Is(err, agentfile.ErrInvalidFile) || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", tc.name, err, tc.want)
		}
	}
}

func example(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "examples", "business-extract")
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dst, "out"))
	return dst
}

func TestBusinessExtractText(t *testing.T) {
	dir := example(t)
	a, err := agentfile.Load(filepath.Join(dir, "business-extract.md"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := agentfile.ReadInput(filepath.Join(dir, "input", "company.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "biz", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	var steps map[string]string
	if err := res.Result.State.Get("steps", &steps); err != nil {
		t.Fatal(err)
	}
	if steps["company_name"] != "Acme Anvils GmbH" || steps["location"] != "Berlin, Germany" || res.Structured {
		t.Fatalf("steps %v", steps)
	}
	out, err := os.ReadFile(filepath.Join(dir, "out", "business-summary.md"))
	if err != nil || !strings.HasPrefix(string(out), "Acme Anvils GmbH is a Berlin family firm") {
		t.Fatalf("output file %q %v", out, err)
	}
	// Every step committed; the prompt carried input, state and task.
	n := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "biz"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = cp
	}
	if n != 4 {
		t.Fatalf("%d checkpoints", n)
	}
}

func TestBusinessExtractStructuredWithHandoff(t *testing.T) {
	dir := example(t)
	a, err := agentfile.Load(filepath.Join(dir, "business-extract-structured.md"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := agentfile.ReadInput(filepath.Join(dir, "input", "company.txt"))
	s := inmem.Open(store.Options{})
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "biz2", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Structured || !strings.Contains(string(res.FinalOutput), `"company_name":"Acme Anvils GmbH"`) {
		t.Fatalf("final output %s", res.FinalOutput)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "business-summary.json"))
	if err != nil || !strings.Contains(string(b), "\n  \"company_name\": \"Acme Anvils GmbH\"") {
		t.Fatalf("json output %s %v", b, err)
	}
	if res.Next == nil || res.Next.Agent != "business-report" || res.Next.Namespace != "handoff:business-report" {
		t.Fatalf("handoff %+v", res.Next)
	}
	report, err := os.ReadFile(filepath.Join(dir, "out", "business-report.md"))
	if err != nil || !strings.HasPrefix(string(report), "# Acme Anvils GmbH") {
		t.Fatalf("report %q %v", report, err)
	}
	// The handoff agent got the structured output as JSON input, in the
	// same thread.
	cp, err := s.Load(context.Background(), store.LoadRequest{Thread: "biz2", Namespace: "handoff:business-report"})
	if err != nil {
		t.Fatal(err)
	}
	var hin agentfile.Input
	if err := cp.State.Get("input", &hin); err != nil || hin.Kind != "json" || hin.Source != "handoff:business-extract-structured" || !strings.Contains(string(hin.Content), "BusinessSummary") && !strings.Contains(string(hin.Content), "company_name") {
		t.Fatalf("handoff input %+v %v", hin, err)
	}
	if got, _ := cp.State.Raw("agent_id"); string(got) != `"business-report"` {
		t.Fatalf("agent_id %s", got)
	}
	_ = state.StopSuccess
}

func TestSafeDir(t *testing.T) {
	dir := t.TempDir()
	agentsDir := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agentsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(agentsDir, "r.yaml"), []byte("replies:\n  - text: hi\n"), 0o644)
	src := "---\nname: escape\nmodel: {provider: scripted, script: r.yaml}\noutput: {file: ../../outside.txt}\n---\n## Instructions\nsay hi\n"
	p := filepath.Join(agentsDir, "escape.md")
	os.WriteFile(p, []byte(src), 0o644)
	a, err := agentfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "e", Input: agentfile.TextInput("inline", "x")})
	if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("escape: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "outside.txt")); err == nil {
		t.Fatal("file written outside the safe dir")
	}
	// An empty chain runs one shot with the instructions.
	src = "---\nname: oneshot\nmodel: {provider: scripted, script: r.yaml}\n---\n## Instructions\nsay hi\n"
	os.WriteFile(p, []byte(src), 0o644)
	a, _ = agentfile.Load(p)
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "o", Input: agentfile.TextInput("inline", "x")})
	if err != nil || string(res.FinalOutput) != `"hi"` {
		t.Fatalf("one shot: %s %v", res.FinalOutput, err)
	}
}

func TestAgentFileTools(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk"), 0o644)
	os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(`replies:
  - tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - tool_calls: [{name: write_file, args: {path: out/todo.txt, content: "buy milk"}}, {name: read_file, args: {path: ../../etc/passwd}}]
  - text: "Done: todo written."
`), 0o644)
	src := "---\nname: tooled\nmodel: {provider: scripted, script: r.yaml}\ntools: [read_file, write_file, list_files]\n---\n## Instructions\nTurn notes into a todo file.\n"
	p := filepath.Join(dir, "tooled.md")
	os.WriteFile(p, []byte(src), 0o644)
	a, err := agentfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "tools", Input: agentfile.TextInput("inline", "go")})
	if err != nil || string(res.FinalOutput) != `"Done: todo written."` {
		t.Fatalf("run: %s %v", res.FinalOutput, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "todo.txt"))
	if err != nil || string(b) != "buy milk" {
		t.Fatalf("tool output %q %v", b, err)
	}
}
