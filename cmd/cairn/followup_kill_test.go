package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// followUpText is the follow-up TestFollowUpKilledAtRunEnd sends.
const followUpText = "then list them again"

// TestFollowUpKilledAtRunEnd: a follow-up sent to a chat's run on
// cairn serve (SQLite), the server SIGKILLed while the run's model
// thinks. A new server resumes the run under strace, SIGKILLed at its
// first pwrite64, then its second, and so on until it finishes both the
// run and the follow-up's run (the writes between the run's last step
// and its record's end, where the follow-up's run is made, included);
// after each kill a plain server finishes. Every time the follow-up is
// taken by exactly one checkpoint, answered once, and exactly one run
// was made of it. CAIRN_KILL_STRIDE (default 1) kills at every n-th
// write only.
func TestFollowUpKilledAtRunEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	strace := needTool(t, "strace")
	chat := steerChat(t, 500)
	dir := filepath.Dir(chat)
	image := followUpImage(t, dir)
	// The resumed run's model answers at once from here on.
	if err := os.WriteFile(filepath.Join(dir, "replies", "chat.yaml"), []byte("replies:\n  - {tool_calls: [{name: list_files, args: {dir: .}}]}\n  - {echo_user: \"You said: {user}\", repeat: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stride := 1
	if n, err := strconv.Atoi(os.Getenv("CAIRN_KILL_STRIDE")); err == nil && n > 0 {
		stride = n
	}
	killed := 0
	for n := 1; n <= 2000; n += stride {
		url := "sqlite:" + copyImage(t, image)
		args := []string{strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=pwrite64", "-e", "inject=pwrite64:signal=SIGKILL:when=" + strconv.Itoa(n)}
		cmd := cairnProcess(t, nil, "serve", "--addr", "127.0.0.1:0", "--assistants", dir, "--store", url)
		cmd.Args, cmd.Path = append(args, cmd.Args...), strace
		if !killedBeforeDone(t, cmd, url) {
			t.Logf("%d kill points (every %d write), each followed by a finish that took the follow-up once", killed, stride)
			if killed == 0 {
				t.Fatal("no kill landed")
			}
			return
		}
		killed++
		p := startServe(t, "--assistants", dir, "--store", url)
		waitFollowedUp(t, p, url)
		p.stop(os.Interrupt)
		checkFollowedUp(t, p, url)
	}
	t.Fatal("the server never finished under strace")
}

// followUpImage makes a store holding thread f's chat run cut short by a
// kill while its model thinks, with a follow-up pending; it returns the
// store's folder.
func followUpImage(t *testing.T, dir string) string {
	t.Helper()
	img := t.TempDir()
	p := startServe(t, "--assistants", dir, "--store", "sqlite:"+filepath.Join(img, "state.db"))
	var th, run, en map[string]any
	p.call(t, "POST", "/threads", map[string]any{"thread_id": "f"}, &th)
	if code := p.call(t, "POST", "/threads/f/runs", map[string]any{"assistant_id": "chat", "input": "which files?"}, &run); code != 200 {
		t.Fatalf("run: %d %v", code, run)
	}
	waitThread(t, "sqlite:"+filepath.Join(img, "state.db"), "f")
	if code := p.call(t, "POST", "/threads/f/steer", map[string]any{"message": followUpText, "follow_up": true}, &en); code != 202 || en["state"] != "pending" {
		t.Fatalf("follow-up: %d %v", code, en)
	}
	p.stop(os.Kill) // in the model's first call (500 ms)
	if f := readSteerFacts(t, "sqlite:"+filepath.Join(img, "state.db"), "f"); f.cursor != 0 || len(f.msgs) != 1 {
		t.Fatalf("the image: %+v", f)
	}
	return img
}

// copyImage copies a store's folder (the database and its WAL) to a new
// one and returns the database's path.
func copyImage(t *testing.T, img string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"state.db", "state.db-wal", "state.db-shm"} {
		b, err := os.ReadFile(filepath.Join(img, name))
		if os.IsNotExist(err) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(out, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(out, "state.db")
}

// killedBeforeDone runs a server and reports whether it was killed
// before it finished thread f's runs; a server that finished them is
// stopped.
func killedBeforeDone(t *testing.T, cmd *exec.Cmd, url string) bool {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case <-exited:
			return true
		case <-time.After(50 * time.Millisecond):
		}
		if recs := threadRuns(t, url); len(recs) >= 2 && !slices.ContainsFunc(recs, func(r store.RunRecord) bool { return !runs.Terminal(r.Status) }) {
			_ = cmd.Process.Kill()
			<-exited
			return false
		}
	}
	_ = cmd.Process.Kill()
	t.Fatal("the server under strace neither died nor finished in a minute")
	return false
}

// threadRuns reads thread f's run records from the store (none while
// it cannot be read).
func threadRuns(t *testing.T, url string) []store.RunRecord {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		return nil
	}
	defer s.Close()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := rl.Runs(ctx, store.RunQuery{Thread: "f"})
	return recs
}

// waitFollowedUp waits until thread f's follow-up was consumed and the
// store has the thread's run and its follow-up's ended (the server's
// own answers may run ahead of the store by the run's last write).
func waitFollowedUp(t *testing.T, p *serveProcess, url string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var inbox []map[string]any
		p.call(t, "GET", "/threads/f/inbox", nil, &inbox)
		recs := threadRuns(t, url)
		if len(inbox) == 1 && inbox[0]["state"] == "consumed" && len(recs) >= 2 && !slices.ContainsFunc(recs, func(r store.RunRecord) bool { return !runs.Terminal(r.Status) }) {
			return
		}
	}
	t.Fatalf("thread f never finished:\n%s", lastLines(p.logText(), 40))
}

// checkFollowedUp checks thread f: two runs, both successes; the
// follow-up made the second, taken by one checkpoint and answered once.
func checkFollowedUp(t *testing.T, p *serveProcess, url string) {
	t.Helper()
	recs := threadRuns(t, url)
	if len(recs) != 2 {
		t.Fatalf("%d runs on the thread, want the run and one follow-up run: %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Status != runs.StatusSuccess {
			for _, x := range recs {
				t.Logf("run %s %s created %d updated %d %s", x.ID, x.Status, x.CreatedAt, x.UpdatedAt, x.Data)
			}
			t.Fatalf("run %s ended %s:\n%s", r.ID, r.Status, lastLines(p.logText(), 40))
		}
	}
	f := readSteerFacts(t, url, "f")
	checkOnce(t, f, 1, followUpText)
	if got := f.msgs[len(f.msgs)-1]; got != "ai:You said: "+followUpText {
		t.Fatalf("the last answer %q (messages %q)", got, f.msgs)
	}
	if !strings.Contains(strings.Join(f.msgs, "|"), "human:which files?") {
		t.Fatalf("the first run's input is gone: %q", f.msgs)
	}
}
