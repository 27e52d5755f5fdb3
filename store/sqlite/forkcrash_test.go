package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/storetest"
)

// forkChild forks thread src at 3 into a new thread "copy".
func forkChild(path string) error {
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Fork(context.Background(), store.ForkRequest{Thread: "src", At: 3, Into: "copy"}); err != nil {
		return err
	}
	return s.Close()
}

// TestForkIntoCrash kills a process that forks into a new thread at each
// of its file writes in turn (strace injects SIGKILL on entry to the Nth
// pwrite64, so that write and all later ones never happen). After every
// kill the store holds either no thread "copy" — and the retried fork
// succeeds — or the whole fork: never an empty thread that blocks the
// retry with "thread exists".
func TestForkIntoCrash(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.db")
	s := openAt(t, seed)
	want3 := storetest.SeedForkSource(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seedBytes, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(seed + "-wal"); err == nil {
		t.Fatal("closed store left a WAL; the copies would miss it")
	}
	killed, whole, none := 0, 0, 0
	killEachWrite(t, seedBytes, "fork", 300, func(path string, n int, finished bool, out []byte) {
		if !finished {
			killed++
		}
		s := openAt(t, path)
		if storetest.CheckForkAfterKill(t, s, n, finished, out, want3) {
			none++
		} else {
			whole++
		}
		s.Close()
	})
	if killed == 0 || none == 0 {
		t.Fatalf("no kill landed before the commit (%d kills, %d without thread, %d whole)", killed, none, whole)
	}
	t.Logf("%d kill points: %d left no thread, %d the whole fork", killed, none, whole)
}

// killEachWrite runs child job on a copy of seed (the job's last argument
// is the copy's path) once for each of the job's file writes, n = 1, 2, …:
// strace injects SIGKILL on entry to the nth pwrite64, so that write and
// every later one never happen. check looks at each copy afterwards; the
// loop ends with the first run that finishes, at most limit runs.
func killEachWrite(t *testing.T, seed []byte, job string, limit int, check func(path string, n int, finished bool, out []byte)) {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= limit; n++ {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, seed, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=pwrite64",
			"-e", "inject=pwrite64:signal=SIGKILL:when="+strconv.Itoa(n), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+job+" "+path)
		out, err := cmd.CombinedOutput()
		check(path, n, err == nil, out)
		if err == nil {
			return
		}
	}
	t.Fatalf("%s never finished under strace", job)
}
