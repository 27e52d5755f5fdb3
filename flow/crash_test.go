package flow_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const crashSteps = 200

// crashGraph is a 200-step loop whose node records a side effect, keyed by
// its idempotency key, before returning its update.
func crashGraph(t testing.TB, effects *os.File, proc string) *flow.Compiled {
	var mu sync.Mutex
	g := flow.NewGraph(schema).
		AddNode("step", func(ctx context.Context, d state.Doc) (state.Update, error) {
			info, _ := flow.Info(ctx)
			if effects != nil {
				mu.Lock()
				_, err := fmt.Fprintf(effects, "%s %s\n", proc, info.Key)
				mu.Unlock()
				if err != nil {
					return nil, err
				}
			}
			time.Sleep(3 * time.Millisecond) // room for the kills to land mid-step
			var n int
			_ = d.Get("count", &n)
			return state.Update{"count": 1, "messages": state.Message{ID: "m" + strconv.Itoa(n+1), Role: "assistant", Content: fmt.Sprintf("step %d", n+1)}}, nil
		}).
		AddEdge(flow.START, "step").
		AddRouter("step", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var n int
			if err := d.Get("count", &n); err != nil {
				return nil, err
			}
			if n < crashSteps {
				return flow.To("step"), nil
			}
			return nil, nil
		})
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// crashChild is the process the test kills: it starts or resumes thread
// "crash" and runs it to the end.
func crashChild(dbPath, logPath, proc string) error {
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := sqlite.OpenStore(context.Background(), dbPath, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := flow.NewRunner(crashGraph(nil, f, proc), s, flow.Options{RecursionLimit: 10 * crashSteps})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := s.Thread(ctx, "crash"); errors.Is(err, store.ErrNotFound) {
		_, err = r.Invoke(ctx, "crash", nil)
		return err
	}
	_, err = r.Resume(ctx, "crash", nil)
	return err
}

// TestKillResume kills a real process with SIGKILL at random points during
// a 200-step run, 50 times, resuming each time. The final state must be
// byte-identical to an uninterrupted run, and no step that committed may run
// again: a key seen in a later process must be the step the killed process
// was in the middle of.
func TestKillResume(t *testing.T) {
	crashtest.RunChild("CAIRN_CRASH_CHILD", func() error {
		return crashChild(os.Getenv("CAIRN_CRASH_DB"), os.Getenv("CAIRN_CRASH_LOG"), os.Getenv("CAIRN_CRASH_PROC"))
	})
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "crash.db"), filepath.Join(dir, "effects.log")
	rng := rand.New(rand.NewPCG(1, 2))
	start := func(proc int) *exec.Cmd {
		return crashtest.Start(t, "TestKillResume", "CAIRN_CRASH_CHILD=1", "CAIRN_CRASH_DB="+db, "CAIRN_CRASH_LOG="+logPath, "CAIRN_CRASH_PROC="+strconv.Itoa(proc))
	}
	kills := 0
	for proc := 0; kills < 50; proc++ {
		before := crashtest.FileSize(logPath)
		cmd := start(proc)
		// Kill only once the child is running steps, at a random point.
		crashtest.WaitFor(t, 20*time.Second, fmt.Sprintf("child %d to run a step", proc), func() bool { return crashtest.FileSize(logPath) != before })
		time.Sleep(time.Duration(rng.IntN(10_000)) * time.Microsecond)
		killed, err := crashtest.Kill(cmd)
		if killed {
			kills++
			continue
		}
		if err != nil {
			t.Fatalf("child %d: %v", proc, err)
		}
		t.Fatalf("the run finished after %d kills, before 50 could land", kills)
	}
	// Finish the run.
	final := start(9999)
	if err := final.Wait(); err != nil {
		t.Fatalf("final child: %v", err)
	}

	// The crashed-and-resumed thread equals an uninterrupted run.
	s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	got, err := s.Load(ctx, store.LoadRequest{Thread: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	refRunner, err := flow.NewRunner(crashGraph(t, nil, ""), s, flow.Options{RecursionLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := refRunner.Invoke(ctx, "reference", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.State.String() != ref.State.String() {
		t.Fatalf("final state differs from an uninterrupted run:\n got %.200s\nwant %.200s", got.State, ref.State)
	}
	// History is one line: no forks, no step twice.
	var n int
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "crash"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Parent != cp.Seq-1 {
			t.Fatalf("history forked at %d (parent %d)", cp.Seq, cp.Parent)
		}
		n++
	}
	if n != crashSteps+1 {
		t.Fatalf("%d checkpoints, want %d", n, crashSteps+1)
	}
	// Side effects: a key may appear in a later process only if it was the
	// last key of the process that was killed.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lastOf := map[string]string{}
	seenIn := map[string]string{}
	reruns := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		proc, key, _ := strings.Cut(sc.Text(), " ")
		if prev, ok := seenIn[key]; ok && prev != proc {
			if lastOf[prev] != key {
				t.Fatalf("step %s ran in process %s after it had completed in process %s", key, proc, prev)
			}
			reruns++
		}
		seenIn[key] = proc
		lastOf[proc] = key
	}
	if len(seenIn) != crashSteps {
		t.Fatalf("%d distinct steps ran, want %d", len(seenIn), crashSteps)
	}
	t.Logf("%d kills, %d steps re-run after a kill (each the one in flight)", kills, reruns)
}

// TestTwoResumersOneThread runs two runners, each with its own store
// connections to one SQLite file (as two processes would), resuming the same
// thread at once, 1000 times: exactly one commits each step, the other gets
// ErrConflict and writes nothing, and history never forks.
func TestTwoResumersOneThread(t *testing.T) {
	trials := 1000
	if testing.Short() {
		trials = 100
	}
	path := filepath.Join(t.TempDir(), "two.db")
	open := func() store.Store {
		s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2 := open(), open()
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddNode("c", logNode("c")).Chain("a", "b", "c")
	c := mustCompile(t, g)
	setup, err := flow.NewRunner(c, s1, flow.Options{InterruptBefore: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := flow.NewRunner(c, s1, flow.Options{})
	r2, _ := flow.NewRunner(c, s2, flow.Options{})
	ctx := context.Background()
	for i := 0; i < trials; i++ {
		thread := "two-" + strconv.Itoa(i)
		if _, err := setup.Invoke(ctx, thread, nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, r := range []*flow.Runner{r1, r2} {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[j] = r.Resume(ctx, thread, nil) }()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConflict):
			default:
				t.Fatalf("trial %d: %v", i, err)
			}
		}
		if wins < 1 {
			t.Fatalf("trial %d: nobody finished: %v", i, errs)
		}
		n := 0
		for cp, err := range s1.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
			if err != nil {
				t.Fatal(err)
			}
			if cp.Parent != cp.Seq-1 {
				t.Fatalf("trial %d: history forked at %d", i, cp.Seq)
			}
			if n == 0 && logOf(t, cp.State) != nil && strings.Join(logOf(t, cp.State), ",") != "a,b,c" {
				t.Fatalf("trial %d: final log %v", i, logOf(t, cp.State))
			}
			n++
		}
		if n != 4 { // input (paused before a), a, b, c
			t.Fatalf("trial %d: %d checkpoints", i, n)
		}
	}
}

// resumeChild resumes thread in the database, for the two-process test:
// exit 0 when it ran (or found nothing to do), 4 on a conflict.
func resumeChild(dbPath, thread string) int {
	s, err := sqlite.OpenStore(context.Background(), dbPath, sqlite.Options{}, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer s.Close()
	r, err := flow.NewRunner(slowChain(nil), s, flow.Options{})
	if err != nil {
		return 2
	}
	_, err = r.Resume(context.Background(), thread, nil)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, store.ErrConflict):
		return 4
	}
	fmt.Fprintln(os.Stderr, "child:", err)
	return 2
}

// slowChain is a → b → c with steps long enough for two processes to
// overlap.
func slowChain(t testing.TB) *flow.Compiled {
	slow := func(name string) flow.NodeFunc {
		return func(ctx context.Context, d state.Doc) (state.Update, error) {
			time.Sleep(2 * time.Millisecond)
			return state.Update{"log": name}, nil
		}
	}
	c, err := flow.NewGraph(schema).AddNode("a", slow("a")).AddNode("b", slow("b")).AddNode("c", slow("c")).Chain("a", "b", "c").Compile()
	if err != nil && t != nil {
		t.Fatal(err)
	}
	return c
}

// TestTwoProcessesResumeOneThread starts two real processes resuming the
// same thread at once: each step is committed by exactly one of them; the
// other stops with a conflict, having written nothing; history never forks.
func TestTwoProcessesResumeOneThread(t *testing.T) {
	if db := os.Getenv("CAIRN_RESUME_CHILD_DB"); db != "" {
		os.Exit(resumeChild(db, os.Getenv("CAIRN_RESUME_CHILD_THREAD"))) // its exit code tells a conflict (4)
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	db := filepath.Join(t.TempDir(), "procs.db")
	s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setup, err := flow.NewRunner(slowChain(t), s, flow.Options{InterruptBefore: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conflicts := 0
	const trials = 20
	for i := 0; i < trials; i++ {
		thread := "procs-" + strconv.Itoa(i)
		if _, err := setup.Invoke(ctx, thread, nil); err != nil {
			t.Fatal(err)
		}
		var cmds []*exec.Cmd
		for j := 0; j < 2; j++ {
			cmds = append(cmds, crashtest.Start(t, "TestTwoProcessesResumeOneThread", "CAIRN_RESUME_CHILD_DB="+db, "CAIRN_RESUME_CHILD_THREAD="+thread))
		}
		codes := []int{}
		for _, cmd := range cmds {
			err := cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != 0 && code != 4 {
				t.Fatalf("trial %d: child exit %d", i, code)
			}
			if code == 4 {
				conflicts++
			}
			codes = append(codes, code)
		}
		if codes[0] == 4 && codes[1] == 4 {
			t.Fatalf("trial %d: both children conflicted", i)
		}
		n := 0
		var log []string
		for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
			if err != nil {
				t.Fatal(err)
			}
			if cp.Parent != cp.Seq-1 {
				t.Fatalf("trial %d: history forked at %d", i, cp.Seq)
			}
			if n == 0 {
				log = logOf(t, cp.State)
			}
			n++
		}
		if n != 4 || strings.Join(log, ",") != "a,b,c" { // input (paused before a), a, b, c
			t.Fatalf("trial %d: %d checkpoints, log %v", i, n, log)
		}
	}
	t.Logf("%d trials, %d conflicts", trials, conflicts)
}
