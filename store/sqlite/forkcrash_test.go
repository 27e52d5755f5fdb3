package sqlite_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// forkChild forks thread src at 3 into a new thread "copy".
func forkChild(path string) error {
	s, err := sqlite.OpenStore(path, sqlite.Options{}, store.Options{})
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
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	ctx := context.Background()
	seed := filepath.Join(t.TempDir(), "seed.db")
	s := openAt(t, seed)
	if _, err := s.CreateThread(ctx, store.Thread{ID: "src", Tenant: "acme", Metadata: map[string]any{"file": "agent.md"}}); err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema()
	doc := state.EmptyDoc()
	var want3 string
	for i := int64(0); i < 5; i++ {
		nd, p, err := schema.Apply(doc, state.Update{"n": i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "src", Parent: i, Patch: p, State: nd, Meta: store.Meta{Next: []string{"step"}}}); err != nil {
			t.Fatal(err)
		}
		if doc = nd; i == 2 {
			want3 = nd.String()
		}
	}
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	killed, whole, none := 0, 0, 0
	for n := 1; ; n++ {
		if n > 300 {
			t.Fatal("the fork never finished under strace")
		}
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, seedBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=pwrite64",
			"-e", "inject=pwrite64:signal=SIGKILL:when="+strconv.Itoa(n), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=fork "+path)
		out, err := cmd.CombinedOutput()
		finished := err == nil
		if !finished {
			killed++
		}
		s := openAt(t, path)
		th, err := s.Thread(ctx, "copy")
		switch {
		case errors.Is(err, store.ErrNotFound):
			if finished {
				t.Fatalf("write %d: the fork finished (%s) but left no thread", n, out)
			}
			none++
			// The retry is not blocked.
			if _, err := s.Fork(ctx, store.ForkRequest{Thread: "src", At: 3, Into: "copy"}); err != nil {
				t.Fatalf("write %d: retrying the fork: %v", n, err)
			}
		case err != nil:
			t.Fatalf("write %d: %v", n, err)
		default:
			if th.Head != 1 || th.Tenant != "acme" || th.Metadata["file"] != "agent.md" {
				t.Fatalf("write %d: killed fork left thread %+v", n, th)
			}
			whole++
		}
		cp, err := s.Load(ctx, store.LoadRequest{Thread: "copy"})
		if err != nil || cp.State.String() != want3 || len(cp.Meta.Next) != 1 {
			t.Fatalf("write %d: forked checkpoint %+v: %v", n, cp, err)
		}
		if src, err := s.Thread(ctx, "src"); err != nil || src.Head != 5 {
			t.Fatalf("write %d: source thread %+v, %v", n, src, err)
		}
		s.Close()
		if finished {
			break
		}
	}
	if killed == 0 || none == 0 {
		t.Fatalf("no kill landed before the commit (%d kills, %d without thread, %d whole)", killed, none, whole)
	}
	t.Logf("%d kill points: %d left no thread, %d the whole fork", killed, none, whole)
}
