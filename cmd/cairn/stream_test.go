package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cairn run streams the models' tokens as they arrive: printed live on
// stderr in messages mode, as message events with --json; none when not
// asked for off a terminal; a bad mode is a usage error.
func TestRunStreamsTokens(t *testing.T) {
	dir := copyExample(t)
	file := filepath.Join(dir, "business-extract.md")
	store := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  []string
		stderr  []string
		without []string
	}{
		{"live tokens", []string{"--stream-mode", "messages"}, 0, nil,
			[]string{"  … company_name     Acme Anvils GmbH\n", "  … summary          Acme Anvils GmbH is a Berlin family firm", "✓ summary"}, nil},
		{"json message events, token by token though the run redacts", []string{"--json"}, 0, []string{`"kind":"message"`, `"text":"Acme "`, `"text":"Anvils "`, `"text":"GmbH"`, `"node":"location"`}, nil, nil},
		{"off a terminal: one line per step", nil, 0, nil, []string{"✓ company_name"}, []string{"…"}},
		{"none", []string{"--json", "--stream-mode", "none"}, 0, []string{`"kind":"step_end"`}, nil, []string{`"kind":"message"`}},
		{"a bad mode", []string{"--stream-mode", "tokens"}, 2, nil, []string{`unknown stream mode "tokens"`}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", file, "--input-text", "Acme Anvils GmbH, Berlin", "--store", store}, tc.args...)
			code, out, errOut := cli(t, nil, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Fatalf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Fatalf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range tc.without {
				if strings.Contains(out+errOut, w) {
					t.Fatalf("output has %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
}

// cairn run --trace-dir writes the trace as the run proceeds: the same
// files cairn export --format trace writes afterwards.
func TestRunTraceDir(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(t.TempDir(), "s.db")}
	live, exported := filepath.Join(t.TempDir(), "live"), filepath.Join(t.TempDir(), "export")
	mustCLI(t, env, "run", filepath.Join(dir, "business-extract.md"), "--input-text", "Acme Anvils GmbH, Berlin", "--thread", "traced", "--trace-dir", live)
	mustCLI(t, env, "export", "traced", "--format", "trace", "--dir", exported)
	for _, f := range []string{"manifest.json", "events.jsonl", "steps.jsonl"} {
		a, _ := os.ReadFile(filepath.Join(live, f))
		b, _ := os.ReadFile(filepath.Join(exported, f))
		if len(a) == 0 || string(a) != string(b) {
			t.Fatalf("%s differs from the export:\n%s\nexport:\n%s", f, a, b)
		}
	}
	if !strings.Contains(mustRead(t, filepath.Join(live, "manifest.json")), `"status": "completed"`) {
		t.Fatal("the live manifest is not completed")
	}
	if code, _, errOut := cli(t, env, "run", filepath.Join("..", "..", "examples", "test-pipeline", "pipeline.yaml"), "--trace-dir", live); code != 2 || !strings.Contains(errOut, "--trace-dir applies to agent files") {
		t.Fatalf("pipeline with --trace-dir: %d %s", code, errOut)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
