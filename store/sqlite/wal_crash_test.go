package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// ckptWALPages is tiny so that background checkpoints, and the writer's
// copies that let the WAL restart, run all the time.
const ckptWALPages = 4

var ckptSchema = state.MustSchema(state.WithField("n", state.ReducerReplace), state.WithField("pad", state.ReducerReplace))

// appendForever appends to thread "k" of the store at path from its head,
// printing each committed seq on stdout, until killed.
func appendForever(path string) error {
	ctx := context.Background()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{WALPages: ckptWALPages}, store.Options{})
	if err != nil {
		return err
	}
	doc, head := state.EmptyDoc(), int64(0)
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: "k"}); err == nil {
		doc, head = cp.State, cp.Seq
	}
	pad := strings.Repeat("p", 3000)
	for {
		nd, p, err := ckptSchema.Apply(doc, state.Update{"n": head + 1, "pad": pad + strconv.FormatInt(head, 10)})
		if err != nil {
			return err
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "k", Parent: head, Patch: p, State: nd})
		if err != nil {
			return err
		}
		doc, head = nd, cp.Seq
		fmt.Println(head)
	}
}

// killAfter starts the test's child with env, which prints each seq it
// commits, lets it commit extra more after acked, kills it with SIGKILL
// 0 to jitterUS µs later, and returns the last seq it reported.
func killAfter(t *testing.T, test string, env []string, acked, extra int64, jitterUS int) int64 {
	t.Helper()
	cmd := crashtest.Command(test, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last atomic.Int64
	last.Store(acked)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				last.Store(n)
			}
		}
	}()
	want := acked + extra
	crashtest.WaitFor(t, 30*time.Second, fmt.Sprintf("commit %d", want), func() bool { return last.Load() >= want })
	time.Sleep(time.Duration(rand.IntN(jitterUS)) * time.Microsecond)
	if killed, err := crashtest.Kill(cmd); !killed {
		t.Fatalf("the child was not killed: %v", err)
	}
	return last.Load()
}

// afterKill opens the store at path again after a kill, checks that
// thread's head is at least the last commit reported (acked), runs check,
// closes the store and returns the head.
func afterKill(t *testing.T, path, thread string, acked int64, check func(s store.Store, head int64) error) int64 {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	th, err := s.Thread(context.Background(), thread)
	if err != nil || th.Head < acked {
		t.Fatalf("head %d after %d commits were reported: %v", th.Head, acked, err)
	}
	if err := check(s, th.Head); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return th.Head
}

// walkHistory walks thread's whole history with every state, checks that
// each holds its own seq in field, and returns how many it walked.
func walkHistory(t *testing.T, s store.Store, thread, field string) int64 {
	t.Helper()
	walked := int64(0)
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread, WithState: true}) {
		var n int64
		if err == nil {
			err = cp.State.Get(field, &n)
		}
		if err != nil || n != cp.Seq {
			t.Fatalf("checkpoint %d holds %s=%d: %v", cp.Seq, field, n, err)
		}
		walked++
	}
	return walked
}

// TestKillDuringBackgroundCheckpoints kills, with SIGKILL at random moments,
// a process whose WAL is checkpointed in the background every few commits,
// and counts what was lost: every commit the process reported is there
// after each kill, and every checkpoint loads with the state it was given.
func TestKillDuringBackgroundCheckpoints(t *testing.T) {
	crashtest.RunChild("CAIRN_CKPT_CHILD", func() error { return appendForever(os.Getenv("CAIRN_CKPT_DB")) })
	if testing.Short() {
		t.Skip("kills processes")
	}
	path := filepath.Join(t.TempDir(), "k.db")
	ctx := context.Background()
	acked := int64(0)
	for round := range 15 {
		acked = killAfter(t, "TestKillDuringBackgroundCheckpoints", []string{"CAIRN_CKPT_CHILD=1", "CAIRN_CKPT_DB=" + path}, acked, 20+rand.Int64N(200), 3000)
		acked = afterKill(t, path, "k", acked, func(s store.Store, head int64) error {
			for _, seq := range []int64{1, head / 2, head} {
				cp, err := s.Load(ctx, store.LoadRequest{Thread: "k", Seq: seq})
				var n int64
				if err == nil {
					err = cp.State.Get("n", &n)
				}
				if err != nil || n != seq {
					return fmt.Errorf("round %d: checkpoint %d holds n=%d: %v", round, seq, n, err)
				}
			}
			return nil
		})
	}
	// Every state of the history, rebuilt from what the kills left.
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if walked := walkHistory(t, s, "k", "n"); walked != acked {
		t.Fatalf("the history holds %d checkpoints, want %d", walked, acked)
	}
	t.Logf("15 kills, %d commits, none lost", acked)
}
