package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// threadsOf lists the thread ids of a store.
func threadsOf(t *testing.T, env map[string]string) []string {
	t.Helper()
	out, _ := mustCLI(t, env, "threads", "--json")
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, th := range list {
		ids = append(ids, th.ID)
	}
	return ids
}

var agentThreadLine = regexp.MustCompile(`(?m)^thread (\S+): running `)

// TestEachRunIsANewThread: cairn run without --thread starts a new thread
// each time, named after the agent, printed before the run; the second run
// sees nothing of the first.
func TestEachRunIsANewThread(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	agentFile := filepath.Join(dir, "business-extract.md")
	var ids []string
	for range 2 {
		_, errOut := mustCLI(t, env, "run", agentFile, "--input-text", "Acme Anvils GmbH, Berlin")
		m := agentThreadLine.FindStringSubmatch(errOut)
		if m == nil || !strings.HasPrefix(m[1], "business-extract-") || strings.Index(errOut, m[0]) != 0 {
			t.Fatalf("no thread line first on stderr:\n%s", errOut)
		}
		ids = append(ids, m[1])
	}
	if ids[0] == ids[1] || ids[0] > ids[1] {
		t.Fatalf("thread ids %v: want two, in start order", ids)
	}
	if got := threadsOf(t, env); len(got) != 2 {
		t.Fatalf("threads %v", got)
	}
	for _, id := range ids {
		out, _ := mustCLI(t, env, "history", id, "--json")
		if strings.Count(out, `"seq"`) != 4 {
			t.Fatalf("thread %s: want 4 checkpoints:\n%s", id, out)
		}
	}
	// --json: the thread comes first, as a JSON line.
	out, _ := mustCLI(t, env, "run", agentFile, "--json")
	first, _, _ := strings.Cut(out, "\n")
	var th struct{ Kind, Thread, Agent string }
	if err := json.Unmarshal([]byte(first), &th); err != nil || th.Kind != "thread" || !strings.HasPrefix(th.Thread, "business-extract-") || th.Agent != "business-extract" {
		t.Fatalf("first JSON line %q: %v", first, err)
	}
	if !strings.Contains(out, `"thread": "`+th.Thread+`"`) {
		t.Fatalf("result does not name the thread:\n%s", out)
	}
}

// TestRunOnExplicitThread: --thread continues a thread with a new run
// (fresh chain steps, history kept); an unfinished run is resumed, not
// abandoned; a thread of another file is refused.
func TestRunOnExplicitThread(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	agentFile := filepath.Join(dir, "business-extract.md")
	mustCLI(t, env, "run", agentFile, "--input-text", "first", "--thread", "conv")
	_, errOut := mustCLI(t, env, "run", agentFile, "--input-text", "second", "--thread", "conv")
	if !strings.HasPrefix(errOut, "thread conv: running business-extract") {
		t.Fatalf("stderr: %s", errOut)
	}
	hist, _ := mustCLI(t, env, "history", "conv", "--json")
	if strings.Count(hist, `"seq"`) != 8 {
		t.Fatalf("history of two runs:\n%s", hist)
	}
	// The second run's input checkpoint (5) starts a fresh chain state.
	st, _ := mustCLI(t, env, "state", "conv", "--at", "5")
	var s5 struct {
		Steps       map[string]any  `json:"steps"`
		FinalOutput json.RawMessage `json:"final_output"`
		Input       struct{ Content string }
	}
	if err := json.Unmarshal([]byte(st), &s5); err != nil || len(s5.Steps) != 0 || (len(s5.FinalOutput) > 0 && string(s5.FinalOutput) != "null") || s5.Input.Content != "second" {
		t.Fatalf("state at 5: %s %v", st, err)
	}
	// A fork leaves the thread's run unfinished: a new run is refused with
	// advice that works.
	mustCLI(t, env, "fork", "conv", "--at", "6")
	code, _, errOut := cli(t, env, "run", agentFile, "--thread", "conv")
	if code != 1 || !strings.Contains(errOut, "unfinished run") {
		t.Fatalf("run on an unfinished thread: %d %s", code, errOut)
	}
	runAdvice(t, env, errOut)
	hist, _ = mustCLI(t, env, "history", "conv", "--json")
	if !strings.Contains(hist, `"seq": 11`) {
		t.Fatalf("the fork did not finish:\n%s", hist)
	}
	// Another file's thread.
	code, _, errOut = cli(t, env, "run", filepath.Join(dir, "business-report.md"), "--thread", "conv")
	if code != 2 || !strings.Contains(errOut, "business-extract.md") {
		t.Fatalf("another file's thread: %d %s", code, errOut)
	}
}

var adviceRE = regexp.MustCompile(`cairn ((?:resume|run) [^,;)\n]*)`)

// runAdvice runs the cairn command an error message advises and checks
// that it succeeds.
func runAdvice(t *testing.T, env map[string]string, msg string) {
	t.Helper()
	m := adviceRE.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no advice in %q", msg)
	}
	args := strings.Fields(strings.TrimSpace(m[1]))
	if code, out, errOut := cli(t, env, args...); code != 0 {
		t.Fatalf("advised cairn %s: exit %d\n%s\n%s", m[1], code, out, errOut)
	}
}

// TestRefusedRunLeavesNothing: a run that cannot finish is refused before
// any model call with exit 2, and leaves no store, no thread, no file.
func TestRefusedRunLeavesNothing(t *testing.T) {
	tests := []struct {
		name  string
		front string
		args  []string
		want  string
	}{
		{"output outside the safe dir", "model: {provider: scripted, script: r.yaml}\noutput: {file: ../escaped.txt}", nil, "output.file"},
		{"schema that cannot be loaded", "model: {provider: scripted, script: r.yaml}\nchain: [{id: a, kind: structured, output_schema: S}]\nschemas: {S: missing.json}", nil, `schema "S"`},
		{"missing API key", "model: {provider: openai-compatible, model_name: gpt-4o, api_key_env: CAIRN_TEST_KEY}", nil, "CAIRN_TEST_KEY"},
		{"missing default key", "model: {provider: anthropic, model_name: claude-x}", nil, "ANTHROPIC_API_KEY"},
		{"missing script", "model: {provider: scripted, script: gone.yaml}", nil, "model.script"},
		{"unknown handoff agent file", "model: {provider: scripted, script: r.yaml}\nhandoff: {enabled: true, agent_id: nobody.md}", nil, "nobody.md"},
		{"safe_dir outside the allowed dir", "model: {provider: scripted, script: r.yaml}\nsafe_dir: /", nil, "--safe-dir"},
		{"safe_dir above the allowed dir", "model: {provider: scripted, script: r.yaml}\nsafe_dir: ..", []string{"--safe-dir", "."}, "outside"},
		{"--model key missing", "model: {provider: scripted, script: r.yaml}", []string{"--model", "anthropic:claude-x"}, "ANTHROPIC_API_KEY"},
		{"--model with a key parameter", "model: {provider: scripted, script: r.yaml}", []string{"--model", "openai-compatible:m@http://127.0.0.1:1/v1?api_key=abc"}, "secret"},
		{"--input with a pipeline", "", []string{"PIPELINE", "--input", "x.txt"}, "--input applies to agent files"},
		{"--safe-dir with a pipeline", "", []string{"PIPELINE", "--safe-dir", "."}, "--safe-dir applies to agent files"},
		{"--model with credentials", "model: {provider: scripted, script: r.yaml}", []string{"--model", "openai-compatible:m@http://u:pw@127.0.0.1:1/v1"}, "credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "agent")
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "r.yaml"), []byte("replies:\n  - text: hi\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "a.md"), []byte("---\nname: a\n"+tc.front+"\n---\n## Instructions\nx\n## step:a\nx\n"), 0o644)
			db := filepath.Join(top, "db", "state.db")
			env := map[string]string{"CAIRN_STORE": "sqlite:" + db}
			args := append([]string{"run", filepath.Join(dir, "a.md"), "--thread", "t"}, tc.args...)
			if tc.name == "safe_dir above the allowed dir" {
				args[len(args)-1] = dir
			}
			if len(tc.args) > 0 && tc.args[0] == "PIPELINE" {
				args = append([]string{"run", filepath.Join(dir, "p.yaml")}, tc.args[1:]...)
			}
			code, out, errOut := cli(t, env, args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q (want 2 and %q); stdout %q", code, errOut, tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(top, "db")); !os.IsNotExist(err) {
				t.Fatalf("a refused run created the store's folder: %v", err)
			}
			if _, err := os.Stat(filepath.Join(top, "escaped.txt")); err == nil {
				t.Fatal("wrote outside the safe dir")
			}
		})
	}
}

// TestResumeKeepsRunOptions: cairn resume finishes a run on the model and
// options it was started with.
func TestResumeKeepsRunOptions(t *testing.T) {
	dir := copyExample(t)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	flagModel := filepath.Join(t.TempDir(), "flag-model.yaml")
	good := "replies:\n  - {step: company_name, text: FLAG name}\n  - {step: location, text: FLAG location}\n  - {step: summary, text: FLAG summary}\n"
	bad := strings.Replace(good, "{step: location, text: FLAG location}", "{step: location, error: {status: 500, message: flaky}}", 1)
	os.WriteFile(flagModel, []byte(bad), 0o644)
	code, _, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--thread", "m", "--model", "scripted:"+flagModel, "--durability", "exit", "--safe-dir", dir)
	if code != 1 || !strings.Contains(errOut, "flaky") || !strings.Contains(errOut, "cairn resume m") {
		t.Fatalf("run: %d %s", code, errOut)
	}
	os.WriteFile(flagModel, []byte(good), 0o644)
	runAdvice(t, env, errOut)
	st, _ := mustCLI(t, env, "state", "m")
	if !strings.Contains(st, `"location": "FLAG location"`) || !strings.Contains(st, `"final_output": "FLAG summary"`) {
		t.Fatalf("resume did not use --model:\n%s", st)
	}
	// Durability exit: the resumed run committed its two steps at its end,
	// as one checkpoint.
	if hist, _ := mustCLI(t, env, "history", "m"); !strings.Contains(hist, "SUCCESS  location,summary") {
		t.Fatalf("resume did not use --durability exit:\n%s", hist)
	}
	out, _ := mustCLI(t, env, "threads", "--json")
	for _, w := range []string{`"model": "scripted:` + flagModel + `"`, `"durability": "exit"`, `"safe_dir": "` + dir + `"`} {
		if !strings.Contains(out, w) {
			t.Fatalf("thread metadata lacks %s:\n%s", w, out)
		}
	}
}

// TestResumeAdvice: each message that advises a command advises one that
// works — a thread whose first run never committed a step is started
// again with cairn run, not sent in a circle to cairn resume.
func TestResumeAdvice(t *testing.T) {
	dir := copyExample(t)
	db := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + db}
	agentFile := filepath.Join(dir, "business-extract.md")
	mustCLI(t, env, "run", agentFile, "--thread", "seed")
	// A crash between creating the thread and its first commit leaves an
	// empty thread with cairn run's metadata.
	out, _ := mustCLI(t, env, "threads", "--json")
	var list []struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateThread(context.Background(), store.Thread{ID: "empty", Metadata: list[0].Metadata}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, _, errOut := cli(t, env, "resume", "empty")
	if code != 1 || !strings.Contains(errOut, "never started") || strings.Contains(errOut, "cairn resume") {
		t.Fatalf("resume of an empty thread: %d %s", code, errOut)
	}
	runAdvice(t, env, errOut)
	if st, _ := mustCLI(t, env, "state", "empty"); !strings.Contains(st, "final_output") {
		t.Fatalf("advised run did not run: %s", st)
	}
}

// TestRacingRunsOnOneThread: two runs started at once on one new thread:
// one runs, the other stops with a conflict that says so; the thread holds
// one run, with no failed step.
func TestRacingRunsOnOneThread(t *testing.T) {
	dir := copyExample(t)
	replies := filepath.Join(dir, "replies", "business-extract.yaml")
	b, _ := os.ReadFile(replies)
	os.WriteFile(replies, []byte(strings.Replace(string(b), "  - step: company_name\n", "  - step: company_name\n    delay_ms: 200\n", 1)), 0o644)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	type result struct {
		code   int
		stderr string
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			code, _, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--thread", "race")
			results <- result{code, errOut}
		}()
	}
	var ok, lost int
	for range 2 {
		r := <-results
		switch {
		case r.code == 0:
			ok++
		case r.code == 1 && (strings.Contains(r.stderr, "another process wrote thread \"race\" first") ||
			strings.Contains(r.stderr, "another process may be running it") || strings.Contains(r.stderr, "or another process is running it")):
			lost++
		default:
			t.Errorf("racing run: exit %d %s", r.code, r.stderr)
		}
	}
	hist, _ := mustCLI(t, env, "history", "race", "--json")
	if ok != 1 || lost != 1 || strings.Count(hist, `"seq"`) != 4 || strings.Contains(hist, "FAILED") {
		t.Fatalf("%d ran, %d lost; history:\n%s", ok, lost, hist)
	}
}

// TestUnfinishedHandoffIsResumed: a run whose handoff failed is unfinished
// even though its own chain completed: a new run on the thread is refused
// with advice that finishes the handoff.
func TestUnfinishedHandoffIsResumed(t *testing.T) {
	dir := copyExample(t)
	replies := filepath.Join(dir, "replies", "business-extract-structured.yaml")
	good, _ := os.ReadFile(replies)
	i := strings.Index(string(good), "  - step: report")
	os.WriteFile(replies, []byte(string(good[:i])+"  - step: report\n    error: {status: 503, message: report writer away}\n"), 0o644)
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	agentFile := filepath.Join(dir, "business-extract-structured.md")
	code, _, errOut := cli(t, env, "run", agentFile, "--thread", "h")
	if code != 1 || !strings.Contains(errOut, "report writer away") {
		t.Fatalf("run: %d %s", code, errOut)
	}
	os.WriteFile(replies, good, 0o644)
	code, _, errOut = cli(t, env, "run", agentFile, "--thread", "h")
	if code != 1 || !strings.Contains(errOut, "namespace handoff:business-report") {
		t.Fatalf("new run over a failed handoff: %d %s", code, errOut)
	}
	runAdvice(t, env, errOut)
	if st, _ := mustCLI(t, env, "state", "h", "--ns", "handoff:business-report"); !strings.Contains(st, `"final_output": "# Acme Anvils GmbH`) {
		t.Fatalf("handoff not finished:\n%s", st)
	}
}

// TestChatMessageOnPausedThread: a chat's new message goes on from a
// thread whose tool calls wait for a review, through cairn run as through
// the server (agentfile.CheckStart, one rule for both; cairn run refused it
// before), while a chain's new run on an unfinished thread is still
// refused (TestRunOnExplicitThread).
func TestChatMessageOnPausedThread(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "usestream"))); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db")}
	chat := filepath.Join(dir, "chat.md")
	if code, _, errOut := cli(t, env, "run", chat, "--input-text", "which files are there?", "--thread", "c"); code != 3 {
		t.Fatalf("the review's pause: exit %d\n%s", code, errOut)
	}
	code, out, errOut := cli(t, env, "run", chat, "--input-text", "hello", "--thread", "c")
	if code != 0 || !strings.Contains(out, "Hello! I am a chat assistant") {
		t.Fatalf("a new message on the paused thread: exit %d\n%s\n%s", code, out, errOut)
	}
	// Another file on the chat's thread is refused.
	if code, _, errOut := cli(t, env, "run", filepath.Join(copyExample(t), "business-extract.md"), "--input-text", "x", "--thread", "c"); code != 2 || !strings.Contains(errOut, "runs "+chat) {
		t.Fatalf("another file on the chat's thread: exit %d\n%s", code, errOut)
	}
}
