package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// copyExample copies examples/business-extract into a temporary directory.
func copyExample(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "examples", "business-extract"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestRunAgentFile(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, out, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract-structured.md"), "--input", filepath.Join(dir, "input", "company.txt"))
	if code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	if !strings.Contains(out, "business-report: success after 1 steps") || !strings.Contains(errOut, "✓ summary") {
		t.Fatalf("output:\n%s\n%s", out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "business-summary.json"))
	if err != nil || !strings.Contains(string(b), `"location": "Berlin, Germany"`) {
		t.Fatalf("output file: %s %v", b, err)
	}
	// --json streams events as JSON lines, then the result.
	code, out, errOut = cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--input-text", "Acme Anvils GmbH, Berlin", "--thread", "inline", "--json")
	if code != 0 || !strings.Contains(out, `"kind":"step_end"`) || !strings.Contains(out, `"stop_reason": "success"`) {
		t.Fatalf("json run: %d %s %s", code, out, errOut)
	}
}

func TestRunFailsThenResumes(t *testing.T) {
	dir := copyExample(t)
	replies := filepath.Join(dir, "replies", "business-extract.yaml")
	good, _ := os.ReadFile(replies)
	bad := strings.Replace(string(good), "  - step: location\n", "  - step: location\n    error: {status: 500, message: upstream down}\n  - step: location_unused\n", 1)
	if err := os.WriteFile(replies, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, _, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--input", filepath.Join(dir, "input", "company.txt"), "--thread", "acme")
	if code != 1 || !strings.Contains(errOut, "upstream down") || !strings.Contains(errOut, "cairn resume acme") {
		t.Fatalf("failing run: %d %s", code, errOut)
	}
	// Fix the cause, resume: the completed step does not run again.
	if err := os.WriteFile(replies, good, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, env, "resume", "acme")
	if code != 0 || !strings.Contains(out, "business-extract: success") || strings.Contains(errOut, "company_name") {
		t.Fatalf("resume: %d %s %s", code, out, errOut)
	}
	code, out, _ = cli(t, env, "history", "acme", "--tree")
	if code != 0 || strings.Count(out, "SUCCESS company_name") != 1 || !strings.Contains(out, "FAILED location") {
		t.Fatalf("history:\n%s", out)
	}
	// Usage errors.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", filepath.Join(dir, "nope.md")}, 2, "nope.md"},
		{[]string{"run", filepath.Join(dir, "business-extract.md"), "--input", "a", "--input-text", "b"}, 2, "not both"},
		{[]string{"run", filepath.Join(dir, "business-extract.md"), "--model", "gpt"}, 2, "--model"},
		{[]string{"run", filepath.Join(dir, "business-extract.md"), "--thread", "bad id"}, 2, "--thread"},
		{[]string{"resume", "ghost"}, 1, `"ghost"`},
	} {
		code, _, errOut := cli(t, env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %s", tc.args, code, errOut)
		}
	}
}

func TestRunPipeline(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "test-pipeline"))); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, ".state"))
	replies := filepath.Join(dir, "replies", "pom-agent.yaml")
	good, _ := os.ReadFile(replies)
	os.WriteFile(replies, []byte("replies:\n  - step: output\n    error: {status: 500, message: compiler crashed}\n"), 0o644)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, _, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", "reg")
	if code != 1 || !strings.Contains(errOut, "compiler crashed") || !strings.Contains(errOut, "cairn resume reg") {
		t.Fatalf("crashing gate 3: %d %s", code, errOut)
	}
	os.WriteFile(replies, good, 0o644)
	code, out, errOut := cli(t, env, "resume", "reg")
	if code != 0 || !strings.Contains(out, "SUCCESS, gates [1 2 3 4] completed") || strings.Contains(errOut, "gate1") {
		t.Fatalf("resume: %d %s %s", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".state", "reg", "demoqa_com-student_registration-gate4-output.json"))
	if err != nil || !strings.Contains(string(b), `"passRate": 100`) {
		t.Fatalf("gate 4 file: %s %v", b, err)
	}
	// The same files, rebuilt from the store alone.
	exp := filepath.Join(dir, "exported")
	code, out, errOut = cli(t, env, "export", "reg", "--format", "gate-files", "--dir", exp)
	if code != 0 || strings.Count(out, "wrote") != 5 {
		t.Fatalf("gate-files export: %d %s %s", code, out, errOut)
	}
	again, err := os.ReadFile(filepath.Join(exp, "demoqa_com-student_registration-gate4-output.json"))
	var x, y any
	_ = json.Unmarshal(again, &x)
	_ = json.Unmarshal(b, &y)
	if err != nil || !reflect.DeepEqual(x, y) {
		t.Fatalf("exported gate 4 differs:\n%s\n%s", again, b)
	}
	code, out, _ = cli(t, env, "export", "reg", "--format", "session-log", "--dir", filepath.Join(dir, "logs"))
	if code != 0 || !strings.Contains(out, "session_reg_") {
		t.Fatalf("session-log export: %d %s", code, out)
	}
}

// TestProgressShowsEachStepsDuration: the ms column is the step's own
// duration, not the time since the run started.
func TestProgressShowsEachStepsDuration(t *testing.T) {
	dir := copyExample(t)
	replies := filepath.Join(dir, "replies", "business-extract.yaml")
	b, _ := os.ReadFile(replies)
	slow := strings.Replace(string(b), "  - step: location\n", "  - step: location\n    delay_ms: 300\n", 1)
	if err := os.WriteFile(replies, []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	_, errOut := mustCLI(t, env, "run", filepath.Join(dir, "business-extract.md"))
	ms := map[string]float64{}
	for _, line := range strings.Split(errOut, "\n") {
		var node string
		var seq int
		var took float64
		if n, _ := fmt.Sscanf(strings.TrimSpace(line), "✓ %s checkpoint %d %f ms", &node, &seq, &took); n == 3 {
			ms[node] = took
		}
	}
	if ms["location"] < 300 || ms["summary"] >= 300 || ms["company_name"] >= 300 {
		t.Fatalf("step durations %v from:\n%s", ms, errOut)
	}
}

// TestExitDurabilityProgress: under --durability exit the steps become one
// checkpoint when the run stops, and the progress lines do not claim
// checkpoints that were never written.
func TestExitDurabilityProgress(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, _, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--input-text", "Acme Anvils GmbH, Berlin", "--thread", "x", "--durability", "exit")
	if code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	if strings.Count(errOut, "kept for exit") != 3 || strings.Contains(errOut, "checkpoint 3") {
		t.Fatalf("progress:\n%s", errOut)
	}
	code, out, errOut := cli(t, env, "history", "x")
	if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Fatalf("history (want a header and the run's one checkpoint): %d\n%s%s", code, out, errOut)
	}
}
