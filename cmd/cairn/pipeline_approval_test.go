package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestPipelineApprovalPauseExits3: a pipeline that reaches an approval
// gate says it waits, where, and the command that answers it, and exits 3
// (README exit codes; seed 001's approval gates), as an agent file's pause
// does; a resume that pauses again at a later gate does the same; answers
// are approve, reject or a JSON approval, and a wrong one (or an answer to
// a thread that waits for none) is refused with exit 2, storing nothing.
func TestPipelineApprovalPauseExits3(t *testing.T) {
	dir := copyPipeline(t)
	file := filepath.Join(dir, "pipeline.yaml")
	edit(t, file, "    name: DOMAgent\n", "    name: DOMAgent\n    approval: true\n")
	edit(t, file, "    name: ExecutionEngine\n", "    name: ExecutionEngine\n    approval: true\n")
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	head := func(thread string) int64 {
		t.Helper()
		th, err := openStore(t, url).Thread(context.Background(), thread)
		if err != nil {
			t.Fatal(err)
		}
		return th.Head
	}
	waits := func(step string, code int, out, errOut string, gate string, done string) {
		t.Helper()
		if code != exitInterrupted || !strings.Contains(out, "waiting for approval at gate "+gate+", gates ["+done+"] completed") ||
			!strings.Contains(errOut, "is waiting for approval at gate "+gate+": cairn resume ap --answer approve") ||
			!strings.Contains(errOut, "is waiting for approval\n") {
			t.Fatalf("%s: exit %d, want %d and the pause before gate %s\n%s\n%s", step, code, exitInterrupted, gate, out, errOut)
		}
	}
	code, out, errOut := cli(t, env, "run", file, "--thread", "ap")
	waits("run", code, out, errOut, "2", "1")
	paused := head("ap")

	for _, tc := range []struct{ name, answer, want string }{
		{"unknown word", "maybe", `--answer "maybe": a pipeline's approval gate takes approve, reject`},
		{"unknown action", `{"action":"skip"}`, `approval action "skip"`},
		{"unknown field", `{"action":"approve","who":"ann"}`, `unknown field "who"`},
		{"edit without a value", `{"action":"edit"}`, "an edit's value is an object"},
		{"edit the state refuses", `{"action":"edit","value":{"gates":5}}`, "the approval's value: field /gates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := cli(t, env, "resume", "ap", "--answer", tc.answer)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want 2 and %q: %s", code, tc.want, errOut)
			}
			if h := head("ap"); h != paused {
				t.Fatalf("a refused answer stored checkpoints: head %d, was %d", h, paused)
			}
		})
	}

	// Approved: gates 2 and 3 run, and the run pauses again before gate 4.
	code, out, errOut = cli(t, env, "resume", "ap", "--answer", "approve")
	waits("resume", code, out, errOut, "4", "1 2 3")
	code, out, errOut = cli(t, env, "resume", "ap", "--answer", `{"action":"approve","by":"ann"}`, "--json")
	var res struct {
		Pipeline struct{ Status string } `json:"pipeline"`
	}
	if code != 0 || json.Unmarshal([]byte(out[strings.LastIndex(out, "\n{\n")+1:]), &res) != nil || res.Pipeline.Status != "SUCCESS" {
		t.Fatalf("approved last gate: %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = cli(t, env, "resume", "ap", "--answer", "approve")
	if code != 2 || !strings.Contains(errOut, `pipeline thread "ap" is not waiting for approval`) {
		t.Fatalf("answer to a finished thread: %d %s", code, errOut)
	}

	// --json: the result names the gate, and the exit is 3 too; a rejection
	// stops the pipeline there, FAILED.
	code, out, errOut = cli(t, env, "run", file, "--thread", "rj", "--json")
	if code != exitInterrupted || !strings.Contains(out, `"waiting_for_approval_at_gate": 2`) || !strings.Contains(out, `"stop_reason": "interrupt"`) {
		t.Fatalf("--json pause: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, env, "resume", "rj", "--answer", "reject")
	if code != 1 || !strings.Contains(out, "pipeline student-registration: FAILED, gates [1] completed") || !strings.Contains(errOut, "ended FAILED") {
		t.Fatalf("reject: %d\n%s\n%s", code, out, errOut)
	}
	if _, err := openStore(t, url).Load(context.Background(), store.LoadRequest{Thread: "rj", Namespace: "gate2"}); err == nil {
		t.Fatal("gate 2 ran after its rejection")
	}
}
