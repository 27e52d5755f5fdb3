package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// childEnv names what a re-executed test binary does instead of running
// tests: "open PATH ID" or "fork PATH".
const childEnv = "CAIRN_SQLITE_TEST_CHILD"

func TestMain(m *testing.M) {
	if job := os.Getenv(childEnv); job != "" {
		if err := runChild(strings.Fields(job)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "open":
		return openChild(args[1], args[2])
	case len(args) == 2 && args[0] == "fork":
		return forkChild(args[1])
	case len(args) == 2 && args[0] == "migrate":
		return migrateChild(args[1])
	}
	return fmt.Errorf("bad child job %q", args)
}

// openChild waits for PATH.go to exist, so that every child opens the new
// store at the same moment, then opens it and commits one checkpoint.
func openChild(path, id string) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Microsecond) {
		if _, err := os.Stat(path + ".go"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no start signal")
		}
	}
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	doc, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"id": id})
	if err != nil {
		return err
	}
	if _, err := s.Append(context.Background(), store.Checkpoint{Thread: "p" + id, Patch: patch, State: doc}); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	return s.Close()
}

func child(t *testing.T, job string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+job)
	return cmd
}

// TestOpenNewStoreRace starts processes that open the same new store at
// the same moment, many times: every one must succeed (waiting for the
// others rather than failing with SQLITE_BUSY), and every commit is there.
func TestOpenNewStoreRace(t *testing.T) {
	rounds, procs := 30, 4
	if testing.Short() {
		rounds = 5
	}
	for r := 0; r < rounds; r++ {
		path := filepath.Join(t.TempDir(), "new", "state.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]string, procs)
		cmds := make([]*exec.Cmd, procs)
		for p := range procs {
			cmds[p] = child(t, fmt.Sprintf("open %s %d", path, p))
			var out strings.Builder
			cmds[p].Stderr = &out
			if err := cmds[p].Start(); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := cmds[p].Wait(); err != nil {
					errs[p] = fmt.Sprintf("%v: %s", err, out.String())
				}
			}()
		}
		time.Sleep(50 * time.Millisecond) // let every child reach the barrier
		if err := os.WriteFile(path+".go", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for p, e := range errs {
			if e != "" {
				t.Fatalf("round %d: process %d: %s", r, p, e)
			}
		}
		s := openAt(t, path)
		for p := range procs {
			if th, err := s.Thread(context.Background(), fmt.Sprintf("p%d", p)); err != nil || th.Head != 1 {
				t.Fatalf("round %d: thread p%d: %+v, %v", r, p, th, err)
			}
		}
		s.Close()
	}
}
