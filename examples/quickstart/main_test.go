package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

func TestCrashAndResume(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	ctx := context.Background()

	// An uninterrupted run, for reference.
	var ref bytes.Buffer
	if code, err := run(ctx, &ref, url, "ref", 0, nil); code != 0 || err != nil {
		t.Fatalf("reference run: %d %v\n%s", code, err, ref.String())
	}
	if !strings.Contains(ref.String(), "done: Keep patches per step and rare snapshots. (stop reason final, 6 steps") {
		t.Fatalf("reference output:\n%s", ref.String())
	}

	// A run stopped hard right after step 3 committed: the "crash" cancels
	// the run, as the process exit does in main.
	cctx, cancel := context.WithCancel(ctx)
	var out bytes.Buffer
	code, err := run(cctx, &out, url, "q", 3, cancel)
	if code != 3 || err == nil {
		t.Fatalf("crash run: %d %v\n%s", code, err, out.String())
	}
	out.Reset()
	if code, err := run(ctx, &out, url, "q", 0, nil); code != 0 || err != nil {
		t.Fatalf("resume: %d %v", code, err)
	}
	if !strings.Contains(out.String(), "resuming thread \"q\" at checkpoint 4") || strings.Contains(out.String(), "read_method ") {
		t.Fatalf("resume output:\n%s", out.String())
	}

	s, err := store.Open(context.Background(), url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Load(ctx, store.LoadRequest{Thread: "ref"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Load(ctx, store.LoadRequest{Thread: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Seq != b.Seq || a.State.String() != b.State.String() {
		t.Fatalf("resumed run differs from uninterrupted run:\n%s\n%s", a.State, b.State)
	}
	// Running again is a no-op: the thread is finished.
	out.Reset()
	if code, err := run(ctx, &out, url, "q", 0, nil); code != 0 || err != nil || strings.Contains(out.String(), "committed") {
		t.Fatalf("rerun: %d %v\n%s", code, err, out.String())
	}
}
