package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
)

// TestPipelineFileFaults puts real faults between a gate's commit and its
// file: strace makes the rename that puts a gate's file in place fail
// with ENOSPC (a full disk), or kills the process there with SIGKILL (a
// crash right after the commit). A failed write stops the run at that
// gate (exit 1, no later gate runs, the advice is cairn resume); a kill
// leaves the files behind the store. Either way cairn resume brings the
// files level with the store — also when the pipeline had finished — and
// every gate ran exactly once.
func TestPipelineFileFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	dir := copyPipeline(t)
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	file := filepath.Join(dir, "pipeline.yaml")
	for _, tc := range []struct {
		name, thread, inject string
		gate                 int    // the gate whose file the fault hits
		completed            []int  // the gates the store holds after the fault
		resumed              string // what the resume prints
	}{
		{"disk full at gate 2", "full", "error=ENOSPC", 2, []int{1, 2}, "SUCCESS, gates [1 2 3 4] completed"},
		{"killed after gate 2", "kill2", "signal=SIGKILL", 2, []int{1, 2}, "SUCCESS, gates [1 2 3 4] completed"},
		{"killed after the last gate", "kill4", "signal=SIGKILL", 4, []int{1, 2, 3, 4}, "is finished (SUCCESS), nothing to run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(dir, ".state", tc.thread, fmt.Sprintf("demoqa_com-student_registration-gate%d-output.json", tc.gate))
			code, killed, out := underStrace(t, strace, target, tc.inject, []string{"CAIRN_STORE=" + url}, "run", file, "--thread", tc.thread)
			switch {
			case tc.inject == "error=ENOSPC" && (code != 1 || killed || !strings.Contains(out, "no space left on device") ||
				!strings.Contains(out, "cairn resume "+tc.thread) || strings.Contains(out, fmt.Sprintf("gate %d ", tc.gate+1))):
				t.Fatalf("a failed write at gate %d: exit %d (killed %v), want 1, the error, the advice and no later gate:\n%s", tc.gate, code, killed, out)
			case tc.inject == "signal=SIGKILL" && !killed:
				t.Fatalf("the kill at gate %d's file did not land: exit %d\n%s", tc.gate, code, out)
			}
			s := openStore(t, url)
			head, err := s.Load(context.Background(), store.LoadRequest{Thread: tc.thread})
			if err != nil {
				t.Fatal(err)
			}
			var pf pipeline.File
			if err := head.State.Get("pipeline", &pf); err != nil || !slices.Equal(pf.CompletedGates, tc.completed) {
				t.Fatalf("the store holds gates %v (%v), want %v", pf.CompletedGates, err, tc.completed)
			}
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the fault did not keep gate %d's file out: %v", tc.gate, err)
			}
			code, out, errOut := cli(t, env, "resume", tc.thread)
			if code != 0 || !strings.Contains(out, tc.resumed) {
				t.Fatalf("resume: exit %d, want 0 and %q\n%s\n%s", code, tc.resumed, out, errOut)
			}
			onceEach(t, s, tc.thread)
			filesMatchStore(t, s, filepath.Join(dir, ".state", tc.thread), tc.thread, 0)
		})
	}
}

// underStrace runs cairn with args in a real process under strace, which
// injects a fault (error=ENOSPC, signal=SIGKILL) into every rename onto
// target, and returns its exit code, whether it was killed, and its output.
func underStrace(t *testing.T, strace, target, inject string, env []string, args ...string) (code int, killed bool, out string) {
	t.Helper()
	cmd := cairnProcess(t, env, args...)
	cmd.Args = append([]string{strace, "-f", "-qq", "-o", os.DevNull, "-P", target,
		"-e", "trace=/^rename", "-e", "inject=/^rename:" + inject}, cmd.Args...)
	cmd.Path = strace
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, true, string(b)
		}
		return ee.ExitCode(), false, string(b)
	case err != nil:
		t.Fatalf("strace: %v\n%s", err, b)
	}
	return 0, false, string(b)
}
