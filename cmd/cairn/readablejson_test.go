package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONNotHTMLEscaped: a structured output holding <, > and & reads as
// written everywhere a user reads it — the run's stdout (text and --json),
// its output file, cairn state and cairn history (table and --json), and a
// pipeline's --json result, progress and gate files — never as \u003c,
// \u003e or \u0026, which is how stored JSON holds them.
func TestJSONNotHTMLEscaped(t *testing.T) {
	const said = "making anvils & <billing> tools"
	dir := copyExample(t)
	edit(t, filepath.Join(dir, "replies", "business-extract-structured.yaml"), "making anvils and blacksmith tools.", said+".")
	edit(t, filepath.Join(dir, "business-extract-structured.md"), "handoff:\n  enabled: true", "handoff:\n  enabled: false")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	file := filepath.Join(dir, "business-extract-structured.md")
	input := filepath.Join(dir, "input", "company.txt")

	pdir := copyPipeline(t)
	edit(t, filepath.Join(pdir, "replies", "test-case-designer.yaml"), "description: Verify student registration with valid data",
		`description: "Verify <form> & submit"`)
	penv := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(pdir, "state.db")}
	pfile := filepath.Join(pdir, "pipeline.yaml")

	type read struct{ what, text string }
	var reads []read
	// The message events of --json carry the model's text as it came,
	// escapes and all (the scripted model writes its json: replies with
	// them): they are left out.
	add := func(what string, code int, out, errOut string) {
		t.Helper()
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", what, code, out, errOut)
		}
		var kept []string
		for _, line := range strings.SplitAfter(out, "\n") {
			if !strings.HasPrefix(line, `{"kind":"message"`) {
				kept = append(kept, line)
			}
		}
		reads = append(reads, read{what, strings.Join(kept, "")})
	}
	readFile := func(what, path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, read{what, string(b)})
	}
	code, out, errOut := cli(t, env, "run", file, "--input", input, "--thread", "html")
	add("run", code, out, errOut)
	readFile("output.file", filepath.Join(dir, "out", "business-summary.json"))
	code, out, errOut = cli(t, env, "run", file, "--input", input, "--thread", "html-json", "--json")
	add("run --json", code, out, errOut)
	code, out, errOut = cli(t, env, "state", "html")
	add("state", code, out, errOut)
	code, out, errOut = cli(t, env, "state", "html", "--json")
	add("state --json", code, out, errOut)
	code, out, errOut = cli(t, env, "history", "html", "--states")
	add("history --states", code, out, errOut)
	code, out, errOut = cli(t, env, "history", "html", "--states", "--json")
	add("history --states --json", code, out, errOut)
	code, out, errOut = cli(t, penv, "run", pfile, "--thread", "p", "--json")
	add("pipeline run --json", code, out, errOut)
	readFile("gate file", filepath.Join(pdir, ".state", "p", "demoqa_com-student_registration-gate1-output.json"))

	for _, r := range reads {
		t.Run(r.what, func(t *testing.T) {
			for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
				if strings.Contains(r.text, esc) {
					t.Fatalf("%s shows %s:\n%s", r.what, esc, r.text)
				}
			}
			if !strings.Contains(r.text, said) && !strings.Contains(r.text, "Verify <form> & submit") {
				t.Fatalf("%s lacks the output as written:\n%s", r.what, r.text)
			}
		})
	}
}
