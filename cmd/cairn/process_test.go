package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childArgsEnv, when set to a JSON list of arguments, makes the test
// binary run cairn with them and exit with its code instead of running
// tests: the tests' way to start real cairn processes to race or kill.
const childArgsEnv = "CAIRN_CLI_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			os.Stderr.WriteString(childArgsEnv + ": " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(run(context.Background(), argv, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// cairnProcess returns a command that runs cairn with args in a real
// process (this test binary), with env added to the environment.
func cairnProcess(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), childArgsEnv+"="+string(b))
	return cmd
}

// killAfter runs cairn with args in a real process and SIGKILLs it after
// the given time; it reports whether the kill landed before the process
// finished on its own.
func killAfter(t *testing.T, after time.Duration, env []string, args ...string) (killed bool) {
	t.Helper()
	cmd := cairnProcess(t, env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	_ = cmd.Process.Kill() // SIGKILL
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	if err != nil {
		t.Fatalf("cairn %v failed on its own: %v\n%s", args, err, out.String())
	}
	return false
}
