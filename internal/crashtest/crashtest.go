package crashtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RunChild runs fn and exits the process when the environment variable
// key is set (the process is a child that Start made): exit 0 when fn
// succeeds, else 2 with the error on stderr. Otherwise it returns at once.
// Call it first thing in the test that Start names.
func RunChild(key string, fn func() error) {
	if os.Getenv(key) == "" {
		return
	}
	if err := fn(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// Command returns a command that runs this test binary again, running only
// the test named test, with env ("KEY=value") added to the environment.
// Its stderr goes to the parent's.
func Command(test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Start starts Command(test, env...), failing the test if it cannot.
func Start(t testing.TB, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := Command(test, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// Killed reports whether the error of a finished command says a signal
// ended it.
func Killed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
}

// Kill sends SIGKILL to a started command and waits for it. killed is
// true when the signal ended it; otherwise err is how it ended first (nil
// for a clean exit).
func Kill(cmd *exec.Cmd) (killed bool, err error) {
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, err
	}
	err = cmd.Wait()
	if Killed(err) {
		return true, nil
	}
	return false, err
}

// WaitFor polls cond until it holds, failing the test with what after
// timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// FileSize is the size of the file at path, 0 when it does not exist.
func FileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// FileContains reports whether the file at path contains s.
func FileContains(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}
