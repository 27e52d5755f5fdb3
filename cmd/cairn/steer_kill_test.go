package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// steerChat writes a chat whose model calls a tool (after delayMS), then
// answers the last user message; it returns the file's path.
func steerChat(t *testing.T, delayMS int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"chat.md":           "---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: replies/chat.yaml}\ntools: [list_files]\n---\n\n## Instructions\n\nHelp.\n",
		"replies/chat.yaml": fmt.Sprintf("replies:\n  - {tool_calls: [{name: list_files, args: {dir: .}}], delay_ms: %d}\n  - {echo_user: \"You said: {user}\", repeat: true}\n", delayMS),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "chat.md")
}

// steerFacts is what the store says of a thread's steering: its head's
// messages (type:content), how many checkpoints of the head's lineage
// raised its inbox cursor to each value, and the head's cursor.
type steerFacts struct {
	msgs   []string
	raised map[int64]int
	cursor int64
}

func readSteerFacts(t *testing.T, url, thread string) steerFacts {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.OpenOptions{}) // read-write: it recovers what a killed writer left, as the next command would
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []state.Message
	if err := head.State.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	f := steerFacts{raised: map[int64]int{}}
	for _, m := range msgs {
		f.msgs = append(f.msgs, m.Type+":"+m.Content)
	}
	cursorOf := func(cp store.Checkpoint) int64 {
		if cp.Meta.Usage == nil {
			return 0
		}
		return cp.Meta.Usage.Inbox
	}
	f.cursor = cursorOf(head)
	var line []store.Checkpoint
	want := head.Seq
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Seq == want {
			line = append(line, cp)
			want = cp.Parent
		}
	}
	for i := 0; i+1 < len(line); i++ {
		if c, p := cursorOf(line[i]), cursorOf(line[i+1]); c > p {
			f.raised[c]++
		}
	}
	return f
}

// checkOnce checks that the thread's history consumed entries 1..n once
// each (one checkpoint raised the cursor past each, none twice) and that
// each message text is in the conversation once, answered.
func checkOnce(t *testing.T, f steerFacts, n int64, texts ...string) {
	t.Helper()
	if f.cursor != n {
		t.Fatalf("head cursor %d, want %d (messages %q)", f.cursor, n, f.msgs)
	}
	total := 0
	for _, k := range f.raised {
		total += k
	}
	if total > int(n) {
		t.Fatalf("cursor raised %v: an entry was consumed twice", f.raised)
	}
	joined := strings.Join(f.msgs, "|")
	for _, text := range texts {
		if c := strings.Count(joined, "human:"+text); c != 1 {
			t.Fatalf("%q is in the conversation %d times: %q", text, c, f.msgs)
		}
	}
	if last := f.msgs[len(f.msgs)-1]; !strings.HasPrefix(last, "ai:You said: ") {
		t.Fatalf("the conversation ends with %q", last)
	}
}

// TestSteerKilledBeforeConsumed: a message sent to a real `cairn run` of
// a chat while its model thinks, the process SIGKILLed before the next
// model call; `cairn resume` takes it once, before its next model call,
// which answers it.
func TestSteerKilledBeforeConsumed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "state.db") }},
		{"postgres", postgresSchema},
	} {
		t.Run(b.name, func(t *testing.T) {
			url := b.url(t)
			env := map[string]string{"CAIRN_STORE": url}
			chat := steerChat(t, 800)
			killed := 0
			defer func() {
				if killed == 0 && !t.Failed() {
					t.Fatal("no trial's run was killed before it finished")
				}
			}()
			for trial := range 3 {
				thread := "k" + strconv.Itoa(trial)
				text := "also check the invoice date " + strconv.Itoa(trial)
				cmd := cairnProcess(t, []string{"CAIRN_STORE=" + url}, "run", chat, "--thread", thread, "--input-text", "which files?")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitThread(t, url, thread)
				if code, out, errOut := cli(t, env, "steer", thread, text); code != 0 || !strings.Contains(out, "steer 1 accepted (pending)") {
					t.Fatalf("steer: %d %s %s", code, out, errOut)
				}
				_ = cmd.Process.Kill() // in the first model call (800 ms)
				if err := cmd.Wait(); err == nil {
					t.Logf("trial %d: the run finished before the kill (a loaded machine)", trial)
					continue
				}
				killed++
				if f := readSteerFacts(t, url, thread); f.cursor != 0 {
					t.Fatalf("trial %d: consumed before the kill: %+v", trial, f)
				}
				if code, _, errOut := cli(t, env, "resume", thread); code != 0 {
					t.Fatalf("trial %d: resume: %d %s", trial, code, errOut)
				}
				f := readSteerFacts(t, url, thread)
				checkOnce(t, f, 1, text)
				if got := f.msgs[len(f.msgs)-1]; got != "ai:You said: "+text {
					t.Fatalf("trial %d: the answer %q", trial, got)
				}
			}
		})
	}
}

// waitThread waits until a thread has its first checkpoint.
func waitThread(t *testing.T, url, thread string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true})
		if err != nil {
			continue
		}
		th, err := s.Thread(ctx, thread)
		s.Close()
		if err == nil && th.Head > 0 {
			return
		}
	}
	t.Fatalf("thread %s never started", thread)
}

// TestSteerKilledInCommit: a steer pending on a thread, taken by the
// first model call of the thread's next `cairn run`; the process is
// SIGKILLed by strace at its first store write, then its second, and so
// on until it finishes (every write of the step that consumes the entry
// included: SQLite's pwrite64 to the WAL, PostgreSQL's writes to the
// server), and each time the run is finished (run again, or resumed):
// the entry is consumed by exactly one checkpoint and answered once.
func TestSteerKilledInCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	chat := steerChat(t, 0)
	setup := func(t *testing.T, url string) {
		env := map[string]string{"CAIRN_STORE": url}
		if code, _, errOut := cli(t, env, "run", chat, "--thread", "c", "--input-text", "which files?"); code != 0 {
			t.Fatalf("first run: %d %s", code, errOut)
		}
		if code, _, errOut := cli(t, env, "steer", "c", "check the date", "--no-run"); code != 0 {
			t.Fatalf("steer: %d %s", code, errOut)
		}
	}
	for _, b := range []struct {
		name, syscall string
		url           func(t *testing.T) string
	}{
		{"sqlite", "pwrite64", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "state.db") }},
		{"postgres", "write", postgresSchema},
	} {
		t.Run(b.name, func(t *testing.T) {
			// A store's background work (the WAL's copy into the database)
			// moves the kill points a little from one attempt to the next:
			// an attempt whose kills all missed the gap between the run's
			// input and the consuming commit is made again.
			for attempt := 1; attempt <= 3; attempt++ {
				killed, pending := killEachWrite(t, strace, b.syscall, func() string { u := b.url(t); setup(t, u); return u }, chat)
				t.Logf("attempt %d: %d kill points, %d with the entry pending after the run's input", attempt, killed, pending)
				if pending > 0 {
					return
				}
			}
			t.Fatal("no kill landed between the run's input and the commit that consumes the entry")
		})
	}
}

// killEachWrite runs the chat's next run on a fresh store (fresh) under
// strace, SIGKILLed at its first write syscall, then its second, and so
// on until it finishes; after each kill it finishes the run and checks
// that the entry was consumed once. It returns the kill points and those
// that left the entry pending after the run's input.
func killEachWrite(t *testing.T, strace, syscall string, fresh func() string, chat string) (killed, pending int) {
	t.Helper()
	for n := 1; n <= 300; n++ {
		url := fresh()
		cmd := cairnProcess(t, []string{"CAIRN_STORE=" + url}, "run", chat, "--thread", "c", "--input-text", "next")
		cmd.Args = append([]string{strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=" + syscall,
			"-e", "inject=" + syscall + ":signal=SIGKILL:when=" + strconv.Itoa(n)}, cmd.Args...)
		cmd.Path = strace
		out, err := cmd.CombinedOutput()
		if err == nil {
			checkOnce(t, readSteerFacts(t, url, "c"), 1, "check the date", "next")
			return killed, pending
		}
		killed++
		if f := readSteerFacts(t, url, "c"); f.cursor == 0 && strings.Contains(strings.Join(f.msgs, "|"), "human:next") {
			pending++
		}
		finishSteered(t, url, out)
		checkOnce(t, readSteerFacts(t, url, "c"), 1, "check the date", "next")
	}
	t.Fatal("the run never finished under strace")
	return killed, pending
}

// finishSteered finishes the run a kill cut short: the run again when
// the kill came before it wrote its input, else a resume.
func finishSteered(t *testing.T, url string, out []byte) {
	t.Helper()
	env := map[string]string{"CAIRN_STORE": url}
	f := readSteerFacts(t, url, "c")
	args := []string{"resume", "c"}
	if !strings.Contains(strings.Join(f.msgs, "|"), "human:next") {
		args = []string{"run", steerChatOf(t, url), "--thread", "c", "--input-text", "next"}
	}
	if code, _, errOut := cli(t, env, args...); code != 0 && !strings.Contains(errOut, "finished") {
		t.Fatalf("%v after the kill (%s): %d %s", args, out, code, errOut)
	}
}

// steerChatOf is the chat file a thread's metadata records.
func steerChatOf(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := s.Thread(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	file, _ := th.Metadata["file"].(string)
	return file
}

// TestSteerWorkerTakeOver: cairn serve --queue on PostgreSQL with two
// workers; a message sent to a queued chat's run while its model
// thinks, then the worker running it SIGKILLed; the other worker takes
// the run over (lease rescue) and the message is taken once, before a
// model call that answers it.
func TestSteerWorkerTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dsn, _ := pgtest.Schema(t, "cairn_steer")
	dir := filepath.Dir(steerChat(t, 800))
	p := startServe(t, "--queue", "--assistants", dir, "--store", dsn)
	workers := map[string]*workerProcess{}
	for _, id := range []string{"w1", "w2"} {
		workers[id] = startWorker(t, "--id", id, "--assistants", dir, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	}
	var th, run, en map[string]any
	p.call(t, "POST", "/threads", map[string]any{"thread_id": "q1"}, &th)
	if code := p.call(t, "POST", "/threads/q1/runs", map[string]any{"assistant_id": "chat", "input": "which files?"}, &run); code != 200 {
		t.Fatalf("queue a run: %d %v", code, run)
	}
	waitThread(t, dsn, "q1")
	if code := p.call(t, "POST", "/threads/q1/steer", map[string]any{"message": "also check the invoice date"}, &en); code != 202 || en["state"] != "pending" {
		t.Fatalf("steer: %d %v", code, en)
	}
	owner := ownerOf(t, dsn, "q1")
	w := workers[owner]
	if w == nil {
		t.Fatalf("lease owner %q is none of the workers", owner)
	}
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if f := readSteerFacts(t, dsn, "q1"); f.cursor != 0 {
		t.Fatalf("consumed before the kill: %+v", f)
	}
	var final map[string]any
	if code := p.call(t, "GET", "/threads/q1/runs/"+run["run_id"].(string)+"/join", nil, &final); code != 200 {
		t.Fatalf("join: %d %v", code, final)
	}
	f := readSteerFacts(t, dsn, "q1")
	checkOnce(t, f, 1, "also check the invoice date")
	if got := f.msgs[len(f.msgs)-1]; got != "ai:You said: also check the invoice date" {
		t.Fatalf("the answer %q (messages %q)", got, f.msgs)
	}
	if now := ownerOf(t, dsn, "q1"); now == owner {
		t.Errorf("the lease is still %s's", owner)
	}
}
