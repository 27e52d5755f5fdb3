package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
)

// copyPipeline copies examples/test-pipeline into a temporary directory.
func copyPipeline(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "test-pipeline"))); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, ".state"))
	return dir
}

// edit replaces old by new in a file of the copied example.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

var threadLine = regexp.MustCompile(`^thread (\S+): running pipeline student-registration`)

// threadOf reads the thread id a run prints first.
func threadOf(t *testing.T, stderr string) string {
	t.Helper()
	m := threadLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the run does not print its thread first:\n%s", stderr)
	}
	return m[1]
}

// openStore opens a store URL for checks.
func openStore(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPipelineRerunIsANewThread: each cairn run of a pipeline file is a new
// run on a new thread, printed first; a finished thread named with --thread
// says so and how to start over; bad files are refused before anything is
// stored (exit 2).
func TestPipelineRerunIsANewThread(t *testing.T) {
	dir := copyPipeline(t)
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	file := filepath.Join(dir, "pipeline.yaml")
	var threads []string
	for i := 0; i < 2; i++ {
		code, out, errOut := cli(t, env, "run", file)
		if code != 0 || !strings.Contains(out, "SUCCESS, gates [1 2 3 4] completed") {
			t.Fatalf("run %d: %d %s %s", i, code, out, errOut)
		}
		th := threadOf(t, errOut)
		if !strings.HasPrefix(th, "student-registration-") {
			t.Fatalf("thread %q", th)
		}
		if _, err := os.Stat(filepath.Join(dir, ".state", th, "demoqa_com-student_registration-pipeline.json")); err != nil {
			t.Fatal(err)
		}
		threads = append(threads, th)
	}
	if threads[0] == threads[1] {
		t.Fatalf("both runs used thread %s", threads[0])
	}
	code, _, errOut := cli(t, env, "run", file, "--thread", threads[0])
	if code != 1 || !strings.Contains(errOut, "is finished (SUCCESS)") || !strings.Contains(errOut, "cairn run "+file) || strings.Contains(errOut, "running") {
		t.Fatalf("finished thread: %d %s", code, errOut)
	}
	// cairn resume of a finished thread has nothing to run: it brings the
	// files up to date with the store.
	code, out, errOut := cli(t, env, "resume", threads[0])
	if code != 0 || !strings.Contains(out, "is finished (SUCCESS), nothing to run") {
		t.Fatalf("resume of a finished thread: %d %s %s", code, out, errOut)
	}

	// Refused up front: exit 2, no thread, no files.
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	keyless := copyPipeline(t)
	edit(t, filepath.Join(keyless, "agents", "dom-agent.md"), "provider: scripted\n  script: ../replies/dom-agent.yaml",
		"provider: openai-compatible\n  model_name: gpt-x\n  api_key_env: CAIRN_TEST_MISSING_KEY")
	noScript := copyPipeline(t)
	os.Remove(filepath.Join(noScript, "replies", "pom-agent.yaml"))
	badContract := copyPipeline(t)
	os.WriteFile(filepath.Join(badContract, "contracts", "gate4.json"), []byte("{"), 0o644)
	blocked := copyPipeline(t)
	os.WriteFile(filepath.Join(blocked, ".state"), []byte("a file, not a folder"), 0o644)
	for _, tc := range []struct{ name, file, want string }{
		{"empty", empty, "empty.yaml: pipeline file is empty"},
		{"missing key", filepath.Join(keyless, "pipeline.yaml"), "CAIRN_TEST_MISSING_KEY"},
		{"missing script", filepath.Join(noScript, "pipeline.yaml"), "gate 3"},
		{"bad contract", filepath.Join(badContract, "pipeline.yaml"), "gate 4 contract"},
		{"state_dir not a folder", filepath.Join(blocked, "pipeline.yaml"), "state_dir:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := cli(t, env, "run", tc.file, "--thread", "refused")
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("%d %s", code, errOut)
			}
			if _, err := openStore(t, url).Thread(context.Background(), "refused"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused run left a thread: %v", err)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(tc.file), ".state", "refused")); err == nil {
				t.Fatalf("a refused run left files: %v", err)
			}
		})
	}
}

// TestPipelineSecretsNeverStored runs the pipeline with model replies that
// hold a configured secret, a password field and an sk-… key, then looks
// for them in the database bytes, the .state files, every namespace's
// state, the run's own output and every export: zero hits. The same run
// with the redaction turned off finds them, so the search can fail.
func TestPipelineSecretsNeverStored(t *testing.T) {
	secrets := []string{"ACME-SECRET-4242", "hunter2pw", "sk-proj4ABCDEFGHIJKLMNOPQRST"}
	setup := func(t *testing.T, secretsYAML string) string {
		dir := copyPipeline(t)
		edit(t, filepath.Join(dir, "pipeline.yaml"), "secrets:\n  keys: [password, apiKey]\n  patterns: [\"sk-[A-Za-z0-9]{8,}\"]\n", secretsYAML)
		r := filepath.Join(dir, "replies", "test-case-designer.yaml")
		edit(t, r, `password: "hunter2"`, `password: "hunter2pw"`)
		edit(t, r, `apiKey: "sk-live1234567890"`, `token_hint: "use sk-proj4ABCDEFGHIJKLMNOPQRST"`)
		edit(t, filepath.Join(dir, "replies", "dom-agent.yaml"), "isSPA: false", "isSPA: false\n      note: \"ACME-SECRET-4242 in the page\"")
		return dir
	}
	leaks := func(t *testing.T, dir string, json bool) []string {
		url := "sqlite:" + filepath.Join(dir, "state.db")
		env := map[string]string{"CAIRN_STORE": url}
		args := []string{"run", filepath.Join(dir, "pipeline.yaml"), "--thread", "sec"}
		if json {
			args = append(args, "--json")
		}
		code, out, errOut := cli(t, env, args...)
		if code != 0 {
			t.Fatalf("run: %d %s", code, errOut)
		}
		// The redactions are told once, after the run, not as log lines
		// (none to tell with redaction off).
		told := 1
		if b, _ := os.ReadFile(filepath.Join(dir, "pipeline.yaml")); bytes.Contains(b, []byte("secrets: {defaults: false}")) {
			told = 0
		}
		if strings.Count(errOut, "secrets were redacted from") != told || strings.Contains(errOut, "level=WARN") {
			t.Fatalf("run's stderr does not tell the redactions once:\n%s", errOut)
		}
		var found []string
		look := func(what string, b []byte) {
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					found = append(found, s+" in "+what)
				}
			}
		}
		look("run output", []byte(out+errOut))
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if b, err := os.ReadFile(filepath.Join(dir, "state.db"+suffix)); err == nil {
				look("state.db"+suffix, b)
			}
		}
		filepath.WalkDir(filepath.Join(dir, ".state"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				look(p, b)
			}
			return nil
		})
		nss, err := openStore(t, url).Namespaces(context.Background(), "sec")
		if err != nil || len(nss) != 5 {
			t.Fatalf("namespaces %v %v", nss, err)
		}
		for _, ns := range nss {
			code, out, errOut := cli(t, env, "state", "sec", "--ns", ns.Name, "--json")
			if code != 0 {
				t.Fatalf("state --ns %q: %s", ns.Name, errOut)
			}
			look("state --ns "+ns.Name, []byte(out))
			code, out, _ = cli(t, env, "history", "sec", "--ns", ns.Name, "--json", "--states")
			if code != 0 {
				t.Fatalf("history --ns %q", ns.Name)
			}
			look("history --ns "+ns.Name, []byte(out))
		}
		for _, format := range []string{"trace", "session-log", "gate-files"} {
			exp := filepath.Join(t.TempDir(), format)
			if code, _, errOut := cli(t, env, "export", "sec", "--format", format, "--dir", exp); code != 0 {
				t.Fatalf("export %s: %s", format, errOut)
			}
			filepath.WalkDir(exp, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(p)
					look("export "+format+" "+filepath.Base(p), b)
				}
				return nil
			})
		}
		return found
	}
	t.Run("redacted", func(t *testing.T) {
		dir := setup(t, "secrets:\n  patterns: [\"ACME-SECRET-[0-9]+\"]\n")
		if found := leaks(t, dir, false); len(found) > 0 {
			t.Fatalf("secrets reached stored or shown bytes:\n%s", strings.Join(found, "\n"))
		}
		dir = setup(t, "secrets:\n  patterns: [\"ACME-SECRET-[0-9]+\"]\n")
		if found := leaks(t, dir, true); len(found) > 0 {
			t.Fatalf("secrets reached stored or shown bytes (--json):\n%s", strings.Join(found, "\n"))
		}
	})
	t.Run("failed gate", func(t *testing.T) {
		dir := setup(t, "secrets:\n  patterns: [\"ACME-SECRET-[0-9]+\"]\n")
		os.WriteFile(filepath.Join(dir, "replies", "pom-agent.yaml"), []byte(
			"replies:\n  - step: output\n    error: {status: 400, message: \"bad key sk-proj4ABCDEFGHIJKLMNOPQRST for ACME-SECRET-4242\"}\n"), 0o644)
		url := "sqlite:" + filepath.Join(dir, "state.db")
		env := map[string]string{"CAIRN_STORE": url}
		code, out, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", "sec")
		if code != 1 || !strings.Contains(errOut, "bad key [REDACTED]") {
			t.Fatalf("failing run: %d %s", code, errOut)
		}
		shown := out + errOut
		for _, args := range [][]string{{"history", "sec", "--json"}, {"history", "sec", "--ns", "gate3", "--json"}, {"state", "sec", "--ns", "gate3", "--json"}} {
			_, o, e := cli(t, env, args...)
			shown += o + e
		}
		b, _ := os.ReadFile(filepath.Join(dir, ".state", "sec", "demoqa_com-student_registration-gate3-output.json"))
		if !bytes.Contains(b, []byte(`"status": "FAILED"`)) {
			t.Fatalf("gate 3 file:\n%s", b)
		}
		shown += string(b)
		for _, suffix := range []string{"", "-wal"} {
			db, _ := os.ReadFile(filepath.Join(dir, "state.db"+suffix))
			shown += string(db)
		}
		for _, s := range []string{"sk-proj4ABCDEFGHIJKLMNOPQRST", "ACME-SECRET-4242"} {
			if strings.Contains(shown, s) {
				t.Fatalf("the failed gate's error leaks %s", s)
			}
		}
	})
	t.Run("control: redaction off", func(t *testing.T) {
		dir := setup(t, "secrets: {defaults: false}\n")
		found := strings.Join(leaks(t, dir, false), "\n")
		for _, s := range secrets {
			if !strings.Contains(found, s+" in state --ns gate") {
				t.Fatalf("the search misses %s:\n%s", s, found)
			}
		}
	})
}

// TestPipelineProgressAndGateFiles: progress shows each gate's status and
// score and each step's own duration; the pipeline's final status is
// stored and exported; a relative --dir is not nested into itself; gate
// files keep <, > and & as they are.
func TestPipelineProgressAndGateFiles(t *testing.T) {
	dir := copyPipeline(t)
	edit(t, filepath.Join(dir, "replies", "execution-engine.yaml"), "validationResult: {score: 100, issues: [], passed: true}",
		`validationResult: {score: 90, issues: ["run 2 flaky"], passed: false}`)
	edit(t, filepath.Join(dir, "replies", "dom-agent.yaml"), "  - step: output\n", "  - step: output\n    delay_ms: 400\n")
	edit(t, filepath.Join(dir, "replies", "test-case-designer.yaml"), "description: Verify student registration with valid data",
		`description: "Verify <form> & submit > 1 field"`)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	code, out, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", "p")
	if code != 0 || !strings.Contains(out, "pipeline student-registration: PARTIAL, gates [1 2 3 4] completed") {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  ✓ gate 1 TestCaseDesigner\s+SUCCESS score\s+95 `),
		regexp.MustCompile(`(?m)^  ✓ gate 2 DOMAgent\s+SUCCESS score\s+87 `),
		regexp.MustCompile(`(?m)^  ~ gate 4 ExecutionEngine\s+PARTIAL score\s+90 `),
		regexp.MustCompile(`(?m)^      - run 2 flaky$`),
	} {
		if !want.MatchString(errOut) {
			t.Fatalf("progress lacks %s:\n%s", want, errOut)
		}
	}
	// Each agent step's ms is its own: gate 2's waits 400 ms, gate 3's not.
	stepMS := regexp.MustCompile(`(?m)^    ✓ output\s+checkpoint \d+\s+(\d+) ms`).FindAllStringSubmatch(errOut, -1)
	if len(stepMS) != 4 {
		t.Fatalf("agent steps:\n%s", errOut)
	}
	ms := func(i int) int { n, _ := strconv.Atoi(stepMS[i][1]); return n }
	if ms(1) < 400 || ms(2) >= 400 || ms(3) >= 400 {
		t.Fatalf("step durations %v:\n%s", stepMS, errOut)
	}
	// Export with a relative --dir, from the pipeline's folder.
	t.Chdir(dir)
	code, out, errOut = cli(t, env, "export", "p", "--format", "gate-files", "--dir", "exported")
	if code != 0 || strings.Count(out, "wrote") != 5 {
		t.Fatalf("export: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "exported", "exported")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("relative --dir nested into itself: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "exported", "demoqa_com-student_registration-pipeline.json"))
	var pf pipeline.File
	if err != nil || json.Unmarshal(b, &pf) != nil || pf.Status != "PARTIAL" || pf.CurrentGate != 4 || pf.Metadata.Domain != "demoqa_com" || pf.Metadata.Feature != "student_registration" {
		t.Fatalf("exported pipeline file %s %v", b, err)
	}
	for _, name := range []string{"demoqa_com-student_registration-pipeline.json", "demoqa_com-student_registration-gate1-output.json", "demoqa_com-student_registration-gate4-output.json"} {
		live, _ := os.ReadFile(filepath.Join(dir, ".state", "p", name))
		exp, _ := os.ReadFile(filepath.Join(dir, "exported", name))
		if len(live) == 0 || !bytes.Equal(live, exp) {
			t.Fatalf("%s: the export differs from the run's file:\n%s\n%s", name, exp, live)
		}
	}
	g1, _ := os.ReadFile(filepath.Join(dir, "exported", "demoqa_com-student_registration-gate1-output.json"))
	if !bytes.Contains(g1, []byte(`"description": "Verify <form> & submit > 1 field"`)) {
		t.Fatalf("gate 1 file escapes HTML:\n%s", g1)
	}
}

// TestPipelineResumeAfterForkInto forks a finished pipeline thread before
// gate 3 into a new thread and resumes it: gates 1 and 2 do not run again,
// gates 3 and 4 do, and each thread keeps its own files.
func TestPipelineResumeAfterForkInto(t *testing.T) {
	dir := copyPipeline(t)
	url := "sqlite:" + filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": url}
	if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", "orig"); code != 0 {
		t.Fatal(errOut)
	}
	origFiles, _ := os.ReadFile(filepath.Join(dir, ".state", "orig", "demoqa_com-student_registration-gate3-output.json"))
	code, _, errOut := cli(t, env, "fork", "orig", "--at", "3", "--into", "branch")
	if code != 0 {
		t.Fatalf("fork: %s", errOut)
	}
	code, out, errOut := cli(t, env, "resume", "branch")
	if code != 0 || !strings.Contains(out, "SUCCESS, gates [1 2 3 4] completed") {
		t.Fatalf("resume: %d %s %s", code, out, errOut)
	}
	if strings.Contains(errOut, "gate 1 ") || strings.Contains(errOut, "gate 2 ") || !strings.Contains(errOut, "✓ gate 3 ") || !strings.Contains(errOut, "✓ gate 4 ") {
		t.Fatalf("the fork ran:\n%s", errOut)
	}
	for _, n := range []string{"1", "2", "3", "4"} {
		if _, err := os.Stat(filepath.Join(dir, ".state", "branch", "demoqa_com-student_registration-gate"+n+"-output.json")); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := os.ReadFile(filepath.Join(dir, ".state", "orig", "demoqa_com-student_registration-gate3-output.json")); !bytes.Equal(again, origFiles) {
		t.Fatal("the fork changed the original thread's files")
	}
}

// TestPipelineRacingProcesses runs two real processes on one pipeline
// thread at once, many times, on SQLite and (with CAIRN_TEST_POSTGRES) on
// PostgreSQL: one wins each step; the loser commits nothing (no FAILED
// step from a conflict) and the .state files always end equal to what the
// store says.
func TestPipelineRacingProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		racePipeline(t, "sqlite:"+filepath.Join(dir, "state.db"), 16)
	})
	t.Run("postgres", func(t *testing.T) {
		racePipeline(t, postgresSchema(t), 8)
	})
}

// postgresSchema returns a store URL on a fresh schema of
// CAIRN_TEST_POSTGRES, dropped after the test; without it the test skips.
func postgresSchema(t *testing.T) string {
	t.Helper()
	dsn, _ := pgtest.Schema(t, "cairn_pipe")
	return dsn
}

// racePipeline runs the race trials on the store at storeURL.
func racePipeline(t *testing.T, storeURL string, trials int) {
	dir := copyPipeline(t)
	for i, name := range []string{"test-case-designer", "dom-agent", "pom-agent", "execution-engine"} {
		edit(t, filepath.Join(dir, "replies", name+".yaml"), "  - step: output\n", "  - step: output\n    delay_ms: "+strconv.Itoa(5*i)+"\n")
	}
	env := map[string]string{"CAIRN_STORE": storeURL}
	gate1 := filepath.Join(dir, "replies", "test-case-designer.yaml")
	good, _ := os.ReadFile(gate1)
	conflicts := 0
	for i := 0; i < trials; i++ {
		thread := "race-" + strconv.Itoa(i)
		// Gate 1 fails first, so both processes start from one committed head.
		os.WriteFile(gate1, []byte("replies:\n  - step: output\n    error: {status: 500, message: down}\n"), 0o644)
		if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "pipeline.yaml"), "--thread", thread); code != 1 {
			t.Fatalf("setup: %d %s", code, errOut)
		}
		os.WriteFile(gate1, good, 0o644)
		conflicts += raceOnce(t, storeURL, thread, i)
		checkFilesMatchStore(t, storeURL, filepath.Join(dir, ".state", thread), thread, i)
	}
	t.Logf("%d trials, %d processes lost a race", trials, conflicts)
}

// raceOnce resumes the thread from two processes at once and returns how
// many lost a race.
func raceOnce(t *testing.T, storeURL, thread string, trial int) int {
	t.Helper()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for j := 0; j < 2; j++ {
		cmd := cairnProcess(t, []string{"CAIRN_STORE=" + storeURL}, "resume", thread)
		var b bytes.Buffer
		cmd.Stderr, cmd.Stdout = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &b)
	}
	wins, conflicts := 0, 0
	for j, cmd := range cmds {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			wins++
		case errors.As(err, &ee) && strings.Contains(outs[j].String(), "conflict"):
			conflicts++
		case errors.As(err, &ee) && strings.Contains(outs[j].String(), "is finished (SUCCESS)"):
			// It started after the other had finished: no race.
		default:
			t.Fatalf("trial %d: child %d: %v\n%s", trial, j, err, outs[j])
		}
	}
	if wins == 0 {
		t.Fatalf("trial %d: no process finished:\n%s\n%s", trial, outs[0], outs[1])
	}
	return conflicts
}

// checkFilesMatchStore fails unless the thread has exactly one FAILED root
// step (the setup's) and its .state files are those the store gives.
func checkFilesMatchStore(t *testing.T, storeURL, live, thread string, trial int) {
	t.Helper()
	s, err := store.Open(context.Background(), storeURL, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	failed := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Status == store.StatusFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("trial %d: %d FAILED root steps (a conflict was committed as a failure)", trial, failed)
	}
	filesMatchStore(t, s, live, thread, trial)
}

// filesMatchStore fails unless the thread's .state files in live are the
// files the store exports for it.
func filesMatchStore(t *testing.T, s store.Store, live, thread string, trial int) {
	t.Helper()
	exp := t.TempDir()
	if _, err := pipeline.ExportGateFiles(context.Background(), s, thread, exp); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(exp)
	liveEntries, _ := os.ReadDir(live)
	if len(entries) != 5 || len(liveEntries) != 5 {
		t.Fatalf("trial %d: %d exported files, %d live files %v", trial, len(entries), len(liveEntries), liveEntries)
	}
	for _, e := range entries {
		a, _ := os.ReadFile(filepath.Join(exp, e.Name()))
		b, _ := os.ReadFile(filepath.Join(live, e.Name()))
		if !bytes.Equal(a, b) {
			t.Fatalf("trial %d: %s contradicts the store:\n%s\nstore says:\n%s", trial, e.Name(), b, a)
		}
	}
}
