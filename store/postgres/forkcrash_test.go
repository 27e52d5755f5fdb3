package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

// forkEnv, when set to a DSN, makes the test binary fork thread src at 3
// into a new thread "copy" on that database instead of running tests.
const forkEnv = "CAIRN_PG_TEST_FORK_CHILD"

func TestMain(m *testing.M) {
	for env, child := range map[string]func(string) error{forkEnv: forkChild, migrateEnv: migrateChild} {
		if dsn := os.Getenv(env); dsn != "" {
			if err := child(dsn); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

func forkChild(dsn string) error {
	s, err := postgres.OpenStore(context.Background(), dsn, postgres.Options{MaxConns: 1}, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Fork(context.Background(), store.ForkRequest{Thread: "src", At: 3, Into: "copy"})
	return err
}

// TestForkIntoCrash kills a process that forks into a new thread at each
// of its socket writes in turn (strace injects SIGKILL on entry to the Nth
// write). After every kill the database holds either no thread "copy" —
// and the retried fork succeeds — or the whole fork, never an empty thread.
func TestForkIntoCrash(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	dsn := schemaDSN(t)
	ctx := context.Background()
	s := open(t, dsn, store.Options{})
	defer s.Close()
	want3 := storetest.SeedForkSource(t, s)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	killed, none := 0, 0
	for n := 1; ; n++ {
		if n > 300 {
			t.Fatal("the fork never finished under strace")
		}
		if err := s.DeleteThread(ctx, "copy"); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		cmd := exec.Command(strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=write,sendto,sendmsg",
			"-e", "inject=write,sendto,sendmsg:signal=SIGKILL:when="+strconv.Itoa(n), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), forkEnv+"="+dsn)
		out, err := cmd.CombinedOutput()
		finished := err == nil
		if storetest.CheckForkAfterKill(t, s, n, finished, out, want3) {
			none++
		}
		if finished {
			break
		}
		killed++
	}
	if killed == 0 || none == 0 {
		t.Fatalf("no kill landed before the commit (%d kills, %d without thread)", killed, none)
	}
	t.Logf("%d kill points", killed)
}
