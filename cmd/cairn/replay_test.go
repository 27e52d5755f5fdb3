package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replayDir copies replay/testdata/reader (an agent file with a tool, its
// script and its notes) and runs the agent on thread t1 of a SQLite store
// there.
func replayDir(t *testing.T) (dir string, env map[string]string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "replay", "testdata", "reader"))); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	mustCLI(t, env, "run", filepath.Join(dir, "reader.md"), "--thread", "t1", "--input-text", "go")
	return dir, env
}

// replayProcess runs cairn replay in a real process and returns its exit
// code and output.
func replayProcess(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	cmd := cairnProcess(t, []string{"CAIRN_STORE=" + env["CAIRN_STORE"]}, append([]string{"replay"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s: %v, or no %q", path, err, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplayCLI: a recorded thread replays to the same end (exit 0); an
// edited prompt departs at the first step whose request changed (exit
// 4), with the call and the difference; a changed tool list too; --into
// writes the new run to a thread of its own and leaves the original as
// it was; --from starts past the changed step.
func TestReplayCLI(t *testing.T) {
	dir, env := replayDir(t)
	agentFile := filepath.Join(dir, "reader.md")
	before := snapshot(t, env, "t1")

	code, out, errOut := replayProcess(t, env, "t1")
	if code != 0 || !strings.Contains(out, "replayed t1: matched to the end (2 checkpoints, 3 calls answered from the recording)") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = replayProcess(t, env, "t1", "--json")
	var rep struct {
		Matched     bool `json:"matched"`
		Checkpoints int  `json:"checkpoints"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Matched || rep.Checkpoints != 2 {
		t.Fatalf("replay --json: exit %d\n%s", code, out)
	}

	editFile(t, agentFile, "say what it holds", "summarise it")
	code, out, errOut = replayProcess(t, env, "t1")
	for _, want := range []string{"departed at checkpoint 2 (instructions) after 1 matching checkpoints", "call 0 of node instructions (model model/0)",
		`"path":"/messages/0/content"`, "summarise it"} {
		if code != exitDeparted || !strings.Contains(out, want) {
			t.Fatalf("replay after a prompt edit: exit %d, want %d and %q\n%s%s", code, exitDeparted, want, out, errOut)
		}
	}

	code, out, _ = replayProcess(t, env, "t1", "--from", "2")
	if code != 0 || !strings.Contains(out, "matched to the end (0 checkpoints") {
		t.Fatalf("replay --from 2 (past the changed step): exit %d\n%s", code, out)
	}

	code, out, _ = replayProcess(t, env, "t1", "--into", "t1-new")
	if code != exitDeparted || !strings.Contains(out, "new run in thread t1-new") {
		t.Fatalf("replay --into: exit %d\n%s", code, out)
	}
	hist, _ := mustCLI(t, env, "history", "t1-new", "--json")
	if strings.Count(hist, `"seq"`) != 2 || !strings.Contains(hist, "instructions") {
		t.Fatalf("the new thread's history:\n%s", hist)
	}
	if after := snapshot(t, env, "t1"); after != before {
		t.Fatalf("replay changed the thread it replayed:\n%s\n%s", before, after)
	}

	editFile(t, agentFile, "summarise it", "say what it holds")
	editFile(t, agentFile, "tools: [read_file]", "tools: [read_file, list_files]")
	code, out, _ = replayProcess(t, env, "t1")
	if code != exitDeparted || !strings.Contains(out, `{"op":"add","path":"/tools/-","value":"list_files"}`) {
		t.Fatalf("replay after a tool was added: exit %d\n%s", code, out)
	}
}

// TestReplayCLIRefusals: bad flags and ids exit 2 (a missing thread 1)
// with a message naming what is wrong, and store nothing.
func TestReplayCLIRefusals(t *testing.T) {
	dir, env := replayDir(t)
	mustCLI(t, env, "run", filepath.Join(dir, "reader.md"), "--thread", "taken", "--input-text", "go")
	threads, _ := mustCLI(t, env, "threads", "--json")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"negative from", []string{"t1", "--from", "-1"}, 2, "--from -1"},
		{"from off the branch", []string{"t1", "--from", "9"}, 2, "no checkpoint 9"},
		{"into itself", []string{"t1", "--into", "t1"}, 2, "--into t1"},
		{"into a thread that exists", []string{"t1", "--into", "taken"}, 2, `thread "taken" exists`},
		{"file and assistants", []string{"t1", "--file", "x.md", "--assistants", dir}, 2, "give one"},
		{"missing file", []string{"t1", "--file", filepath.Join(dir, "nope.md")}, 2, "nope.md"},
		{"no thread", []string{"nope"}, 1, `thread "nope"`},
		{"no such namespace", []string{"t1", "--ns", "gate:9"}, 1, `namespace "gate:9"`},
		{"from with a namespace", []string{"t1", "--ns", "gate:9", "--from", "2"}, 2, "--from with --ns"},
		{"no argument", nil, 2, "accepts 1 arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := replayProcess(t, env, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, want %d; stderr want %q\n%s%s", code, c.code, c.want, out, errOut)
			}
		})
	}
	if after, _ := mustCLI(t, env, "threads", "--json"); after != threads {
		t.Fatalf("a refused replay changed the threads:\n%s\n%s", threads, after)
	}
}

// TestReplayCLINamespace: cairn replay --ns replays one gate of a
// pipeline thread: matched as recorded; with the gate's prompt edited,
// it departs at that gate's step, at its model call (exit 4), while the
// other gates' namespaces still match.
func TestReplayCLINamespace(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "test-pipeline"))); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "cairn.db")}
	t.Chdir(dir)
	mustCLI(t, env, "run", "pipeline.yaml", "--thread", "p1")
	code, out, errOut := replayProcess(t, env, "p1", "--ns", "gate2")
	if code != 0 || !strings.Contains(out, "replayed p1: matched to the end (2 checkpoints") {
		t.Fatalf("replay --ns gate2: exit %d\n%s%s", code, out, errOut)
	}
	editFile(t, filepath.Join(dir, "agents", "dom-agent.md"), "Map every element", "Map each element")
	code, out, errOut = replayProcess(t, env, "p1", "--ns", "gate2")
	if code != exitDeparted || !strings.Contains(out, "departed at checkpoint 2 (output)") || !strings.Contains(out, "Map each element") {
		t.Fatalf("replay --ns gate2 after an edit of gate 2: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = replayProcess(t, env, "p1", "--ns", "gate1")
	if code != exitDeparted || !strings.Contains(out, "departed at checkpoint 3 (gate2) after 2 matching checkpoints: the run departed outside namespace gate1") {
		t.Fatalf("replay --ns gate1: exit %d\n%s%s", code, out, errOut)
	}
}
