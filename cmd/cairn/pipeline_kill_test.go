package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
)

// TestPipelineKilledAndResumed kills a real `cairn run` of the test
// pipeline with SIGKILL at random moments (each gate's model call takes
// 150 ms), then finishes the thread with `cairn resume` in another
// process. Every trial must end with each gate committed exactly once, the
// same gate outputs as an uninterrupted run, and .state files equal to
// what the store says.
func TestPipelineKilledAndResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := copyPipeline(t)
	for _, name := range []string{"test-case-designer", "dom-agent", "pom-agent", "execution-engine"} {
		edit(t, filepath.Join(dir, "replies", name+".yaml"), "  - step: output\n", "  - step: output\n    delay_ms: 150\n")
	}
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	pipeline := filepath.Join(dir, "pipeline.yaml")
	if code, _, errOut := cli(t, env, "run", pipeline, "--thread", "ref"); code != 0 {
		t.Fatalf("reference run: %s", errOut)
	}
	want := gateOutputs(t, filepath.Join(dir, ".state", "ref"))
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	killedMidRun := 0
	for trial := range 8 {
		thread := fmt.Sprintf("k%d", trial)
		after := time.Duration(50+rng.IntN(600)) * time.Millisecond
		if killAfter(t, after, []string{"CAIRN_STORE=" + url}, "run", pipeline, "--thread", thread) {
			killedMidRun++
		}
		finish(t, env, url, pipeline, thread)
		s, err := store.Open(context.Background(), url, store.OpenOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		onceEach(t, s, thread)
		filesMatchStore(t, s, filepath.Join(dir, ".state", thread), thread, trial)
		s.Close()
		if got := gateOutputs(t, filepath.Join(dir, ".state", thread)); !maps.Equal(got, want) {
			t.Fatalf("trial %d: gate outputs differ from an uninterrupted run:\n%v\nwant\n%v", trial, got, want)
		}
	}
	if killedMidRun == 0 {
		t.Fatal("no kill landed while a run was going on")
	}
	t.Logf("8 trials, %d killed mid-run", killedMidRun)
}

// finish resumes a killed run until its pipeline is finished; a run killed
// before its first commit is started again on its thread.
func finish(t *testing.T, env map[string]string, url, pipeline, thread string) {
	t.Helper()
	code, out, errOut := continueRun(t, env, url, thread, "run", pipeline, "--thread", thread)
	if code == 0 && strings.Contains(out, "is finished (SUCCESS), nothing to run") {
		return // killed after its last commit: the resume wrote the files
	}
	if code != 0 || !strings.Contains(out, "SUCCESS, gates [1 2 3 4] completed") {
		t.Fatalf("finishing %s: exit %d\n%s\n%s", thread, code, out, errOut)
	}
}

// onceEach fails unless every gate step of the thread's root namespace was
// committed exactly once.
func onceEach(t *testing.T, s store.Store, thread string) {
	t.Helper()
	seen := map[string]int{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Status == store.StatusSuccess {
			for _, n := range cp.Nodes {
				seen[n]++
			}
		}
	}
	for _, g := range []string{"gate1", "gate2", "gate3", "gate4"} {
		if seen[g] != 1 {
			t.Fatalf("thread %s: %s committed %d times (%v)", thread, g, seen[g], seen)
		}
	}
}

// gateOutputs reads the output of each gate file in a thread's folder.
func gateOutputs(t *testing.T, dir string) map[int]string {
	t.Helper()
	out := map[int]string{}
	for n := 1; n <= 4; n++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("demoqa_com-student_registration-gate%d-output.json", n)))
		if err != nil {
			t.Fatal(err)
		}
		var g pipeline.GateFile
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, g.Output); err != nil {
			t.Fatal(err)
		}
		out[n] = g.Status + " " + buf.String()
	}
	return out
}

// continueRun finishes a killed run the way its user would: cairn resume
// when a step was committed, else the run command again (the process died
// before its thread existed or before its first commit).
func continueRun(t *testing.T, env map[string]string, url, thread string, run ...string) (int, string, string) {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	th, err := s.Thread(context.Background(), thread)
	s.Close()
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && th.Head == 0):
		return cli(t, env, run...)
	case err != nil:
		t.Fatal(err)
	}
	return cli(t, env, "resume", thread)
}
