package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// TestAgentRunKilledAndResumed kills a real `cairn run` of an agent file
// with SIGKILL at random moments (each model call takes 150 ms) and
// finishes it with `cairn resume` in another process: each chain step is
// committed once, and the thread ends in the state and output file of an
// uninterrupted run.
func TestAgentRunKilledAndResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := copyExample(t)
	replies := filepath.Join(dir, "replies", "business-extract.yaml")
	for _, step := range []string{"company_name", "location", "summary"} {
		edit(t, replies, "  - step: "+step+"\n", "  - step: "+step+"\n    delay_ms: 150\n")
	}
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	agentFile := filepath.Join(dir, "business-extract.md")
	input := filepath.Join(dir, "input", "company.txt")
	output := filepath.Join(dir, "out", "business-summary.md")
	if code, _, errOut := cli(t, env, "run", agentFile, "--input", input, "--thread", "ref"); code != 0 {
		t.Fatalf("reference run: %s", errOut)
	}
	wantState := stateJSON(t, env, "ref")
	wantOutput, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	killed := 0
	for trial := range 8 {
		thread := fmt.Sprintf("k%d", trial)
		os.Remove(output)
		after := time.Duration(30+rng.IntN(450)) * time.Millisecond
		if killAfter(t, after, []string{"CAIRN_STORE=" + url}, "run", agentFile, "--input", input, "--thread", thread) {
			killed++
			code, _, errOut := continueRun(t, env, url, thread, "run", agentFile, "--input", input, "--thread", thread)
			if code != 0 {
				t.Fatalf("trial %d: finishing: exit %d %s", trial, code, errOut)
			}
		}
		if got := stateJSON(t, env, thread); got != wantState {
			t.Fatalf("trial %d: state\n%s\nwant\n%s", trial, got, wantState)
		}
		if got, _ := os.ReadFile(output); !bytes.Equal(got, wantOutput) {
			t.Fatalf("trial %d: output file %q, want %q", trial, got, wantOutput)
		}
		stepsOnce(t, url, thread, "company_name", "location", "summary")
	}
	if killed == 0 {
		t.Fatal("no kill landed while a run was going on")
	}
	t.Logf("8 trials, %d killed mid-run", killed)
}

// stateJSON is the state `cairn state THREAD` prints.
func stateJSON(t *testing.T, env map[string]string, thread string) string {
	t.Helper()
	code, out, errOut := cli(t, env, "state", thread)
	if code != 0 {
		t.Fatalf("state %s: %s", thread, errOut)
	}
	return out
}

// stepsOnce fails unless each of the thread's nodes was committed once.
func stepsOnce(t *testing.T, url, thread string, nodes ...string) {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[string]int{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range cp.Nodes {
			seen[n]++
		}
	}
	for _, n := range nodes {
		if seen[n] != 1 {
			t.Fatalf("thread %s: step %s committed %d times (%v)", thread, n, seen[n], seen)
		}
	}
}
