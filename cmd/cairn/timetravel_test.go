package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// mustCLI runs the CLI and fails the test on a non-zero exit.
func mustCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errOut := cli(t, env, args...)
	if code != 0 {
		t.Fatalf("cairn %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

// snapshot is everything the CLI shows of a thread: every namespace's
// history with states, and the state at its head.
func snapshot(t *testing.T, env map[string]string, thread string) string {
	t.Helper()
	var b strings.Builder
	nsOut, _ := mustCLI(t, env, "namespaces", thread, "--json")
	var list []struct {
		Name string `json:"ns"`
	}
	if err := json.Unmarshal([]byte(nsOut), &list); err != nil {
		t.Fatal(err)
	}
	b.WriteString(nsOut)
	for _, n := range list {
		h, _ := mustCLI(t, env, "history", thread, "--ns", n.Name, "--json", "--states")
		st, _ := mustCLI(t, env, "state", thread, "--ns", n.Name, "--json")
		b.WriteString(h + st)
	}
	return b.String()
}

// TestTimeTravelAgentFile is the README's time-travel story through the
// CLI: run an agent file, fork at each checkpoint into a new thread, resume
// the fork; every branch completes with the same result and the original
// thread is unchanged. A fork within the thread resumes too.
func TestTimeTravelAgentFile(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	agentFile := filepath.Join(dir, "business-extract-structured.md")
	mustCLI(t, env, "run", agentFile, "--input", filepath.Join(dir, "input", "company.txt"), "--thread", "orig")
	before := snapshot(t, env, "orig")
	if ns, _ := mustCLI(t, env, "namespaces", "orig"); !strings.Contains(ns, "handoff:business-report  2 ") {
		t.Fatalf("namespaces:\n%s", ns)
	}
	if _, hint := mustCLI(t, env, "history", "orig"); !strings.Contains(hint, "handoff:business-report (2)") || !strings.Contains(hint, "--ns NAME") {
		t.Fatalf("history hint: %q", hint)
	}
	want, _ := mustCLI(t, env, "state", "orig")
	wantReport, _ := mustCLI(t, env, "state", "orig", "--ns", "handoff:business-report")
	for seq := 1; seq <= 4; seq++ {
		b := fmt.Sprintf("b%d", seq)
		out, _ := mustCLI(t, env, "fork", "orig", "--at", fmt.Sprint(seq), "--into", b)
		if !strings.Contains(out, fmt.Sprintf("forked orig@%d into %s@1", seq, b)) {
			t.Fatalf("fork: %s", out)
		}
		out, errOut := mustCLI(t, env, "resume", b)
		if !strings.Contains(out, "business-extract-structured: success after "+fmt.Sprint(4-seq)+" steps") || !strings.Contains(out, "business-report: success") {
			t.Fatalf("resume %s:\n%s\n%s", b, out, errOut)
		}
		if got, _ := mustCLI(t, env, "state", b); got != want {
			t.Fatalf("branch %s ends in\n%s\nwant\n%s", b, got, want)
		}
		if got, _ := mustCLI(t, env, "state", b, "--ns", "handoff:business-report"); got != wantReport {
			t.Fatalf("branch %s report\n%s\nwant\n%s", b, got, wantReport)
		}
		// Resuming a finished branch changes nothing.
		done := snapshot(t, env, b)
		mustCLI(t, env, "resume", b)
		if again := snapshot(t, env, b); again != done {
			t.Fatalf("resuming finished %s changed it:\n%s\n---\n%s", b, done, again)
		}
	}
	if after := snapshot(t, env, "orig"); after != before {
		t.Fatalf("the original thread changed:\n%s\n---\n%s", before, after)
	}
	// A fork within the thread: a new head, resumed on the same thread.
	out, _ := mustCLI(t, env, "fork", "orig", "--at", "2")
	if !strings.Contains(out, "forked orig@2 into orig@5") {
		t.Fatalf("fork: %s", out)
	}
	out, errOut := mustCLI(t, env, "resume", "orig")
	if !strings.Contains(out, "business-extract-structured: success after 2 steps") || strings.Contains(errOut, "company_name ") {
		t.Fatalf("resume orig:\n%s\n%s", out, errOut)
	}
	if got, _ := mustCLI(t, env, "state", "orig"); got != want {
		t.Fatalf("same-thread branch ends in\n%s\nwant\n%s", got, want)
	}
	tree, _ := mustCLI(t, env, "history", "orig", "--tree")
	if !strings.Contains(tree, "└─ 5 SUCCESS -  fork of 2") || !strings.Contains(tree, "   6 SUCCESS location") || !strings.Contains(tree, "   7 SUCCESS summary") {
		t.Fatalf("tree:\n%s", tree)
	}
	// A fork with a changed final output hands the new output off: the
	// report agent runs again on it.
	mustCLI(t, env, "fork", "orig", "--at", "7", "--set", `final_output={"company_name":"Zeta Forge","location":"Lyon, France","summary":"A forge in Lyon, changed by a fork."}`)
	mustCLI(t, env, "resume", "orig")
	hin, _ := mustCLI(t, env, "state", "orig", "--ns", "handoff:business-report")
	if !strings.Contains(hin, "Zeta Forge") {
		t.Fatalf("the handoff did not run on the fork's output:\n%s", hin)
	}
}

// TestTimeTravelGraph: a graph run by a Go program, forked with the CLI at
// each checkpoint, resumes in the program and completes; the original is
// unchanged.
func TestTimeTravelGraph(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + path}
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend))
	g := flow.NewGraph(schema)
	names := []string{"a", "b", "c"}
	for _, n := range names {
		g.AddNode(n, func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"log": []string{n}}, nil
		})
	}
	compiled, err := g.Chain(names...).Compile()
	if err != nil {
		t.Fatal(err)
	}
	withRunner := func(fn func(r *flow.Runner)) {
		s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r, err := flow.NewRunner(compiled, s, flow.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fn(r)
	}
	withRunner(func(r *flow.Runner) {
		if _, err := r.Invoke(context.Background(), "g", state.Update{"log": []string{"start"}}); err != nil {
			t.Fatal(err)
		}
	})
	before := snapshot(t, env, "g")
	want, _ := mustCLI(t, env, "state", "g")
	for seq := 1; seq <= 4; seq++ {
		b := fmt.Sprintf("g%d", seq)
		mustCLI(t, env, "fork", "g", "--at", fmt.Sprint(seq), "--into", b)
		withRunner(func(r *flow.Runner) {
			res, err := r.Resume(context.Background(), b, nil)
			if err != nil || res.StopReason != state.StopSuccess || res.Progress.Steps != 4-seq {
				t.Fatalf("resume %s: %+v %v", b, res, err)
			}
		})
		if got, _ := mustCLI(t, env, "state", b); got != want {
			t.Fatalf("%s: %s, want %s", b, got, want)
		}
	}
	if after := snapshot(t, env, "g"); after != before {
		t.Fatalf("the original thread changed:\n%s\n---\n%s", before, after)
	}
}
