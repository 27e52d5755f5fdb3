package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestBundleImportAs: a bundle imported into the store it came from under
// a new id is a second thread with the same history; its runs get ids of
// their own, and their data names the new thread and runs. The id taken
// (the source's, or the new one a second time) is refused and the thread
// left as it was; another tenant may use the same id.
func TestBundleImportAs(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{MinSnapshotBytes: 512})
	defer s.Close()
	fillBundleThread(t, s, "acme/orig")
	var buf bytes.Buffer
	if _, err := store.ExportBundle(ctx, s, "acme/orig", &buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	before := dumpThread(t, s, "acme/orig")
	cases := []struct {
		name string
		opts store.ImportOptions
		want error
	}{
		{"same id", store.ImportOptions{Tenant: "acme"}, store.ErrConflict},
		{"renamed", store.ImportOptions{Tenant: "acme", As: "copy"}, nil},
		{"renamed again", store.ImportOptions{Tenant: "acme", As: "copy"}, store.ErrConflict},
		{"another tenant", store.ImportOptions{Tenant: "other"}, nil},
		{"bad id", store.ImportOptions{As: "no/slash"}, store.ErrInvalidID},
		{"bad tenant", store.ImportOptions{Tenant: "a b"}, store.ErrInvalidID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := store.ImportBundle(ctx, s, bytes.NewReader(b), c.opts)
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
		})
	}
	if got := dumpThread(t, s, "acme/orig"); got != before {
		t.Fatal("the source thread changed")
	}
	for _, key := range []string{"acme/copy", "other/orig"} {
		if got := dumpThread(t, s, key); got != before {
			t.Fatalf("%s differs from its source:\n%s\n%s", key, got, before)
		}
	}
	// Deleted, the source comes back whole from its bundle, through the
	// engine that knew it.
	if err := s.DeleteThread(ctx, "acme/orig"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ImportBundle(ctx, s, bytes.NewReader(b), store.ImportOptions{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if got := dumpThread(t, s, "acme/orig"); got != before {
		t.Fatalf("re-imported source differs:\n%s\n%s", got, before)
	}
	rl, _ := store.RunLogOf(s)
	runs, err := rl.Runs(ctx, store.RunQuery{Thread: "acme/copy"})
	if err != nil || len(runs) != 2 {
		t.Fatal(runs, err)
	}
	for _, r := range runs {
		if !strings.Contains(string(r.Data), `"thread_id":"copy"`) || !strings.Contains(string(r.Data), `"run_id":"`+r.ID+`"`) || r.Tenant != "acme" {
			t.Fatalf("run %s: %s", r.ID, r.Data)
		}
		evs, _ := rl.Events(ctx, r.ID, 0, 0)
		if len(evs) != 2 || !strings.Contains(string(evs[0].Data), r.ID) {
			t.Fatalf("events of %s: %v", r.ID, evs)
		}
	}
}

// FuzzImportBundle: whatever the bytes, an import never panics, and a
// refused one creates nothing.
func FuzzImportBundle(f *testing.F) {
	f.Add(smallBundle(f))
	f.Add([]byte("CAIRNBDL\x00\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := inmem.Open(store.Options{})
		defer s.Close()
		_, err := store.ImportBundle(context.Background(), s, bytes.NewReader(b), store.ImportOptions{})
		if err == nil {
			return
		}
		for th := range s.Threads(context.Background(), store.ThreadFilter{}) {
			t.Fatalf("refused (%v) but thread %q made", err, th.ID)
		}
	})
}

// plainBackend is a backend without driver.ThreadLoader, whose Insert
// fails after failAfter rows (0: never).
type plainBackend struct {
	driver.Backend
	store.RunLog
	failAfter, n int
}

func (p *plainBackend) Close() error { return p.Backend.Close() }

func (p *plainBackend) Insert(ctx context.Context, r driver.Row) error {
	if p.n++; p.failAfter > 0 && p.n > p.failAfter {
		return errors.New("disk full")
	}
	return p.Backend.Insert(ctx, r)
}

// TestBundleImportWithoutLoader: on a backend without driver.ThreadLoader
// the import writes row by row; a write that fails midway leaves no
// thread and no run behind.
func TestBundleImportWithoutLoader(t *testing.T) {
	ctx := context.Background()
	src := inmem.Open(store.Options{MinSnapshotBytes: 512})
	fillBundleThread(t, src, "th")
	var buf bytes.Buffer
	if _, err := store.ExportBundle(ctx, src, "th", &buf); err != nil {
		t.Fatal(err)
	}
	for _, fail := range []int{1, 20, 0} {
		mem := inmem.New()
		pb := &plainBackend{Backend: mem, RunLog: mem, failAfter: fail}
		s := store.New(pb, store.Options{})
		_, err := store.ImportBundle(ctx, s, bytes.NewReader(buf.Bytes()), store.ImportOptions{})
		if fail > 0 {
			if err == nil {
				t.Fatalf("failing after %d rows: imported", fail)
			}
			for th := range s.Threads(ctx, store.ThreadFilter{}) {
				t.Fatalf("failing after %d rows: thread %q left", fail, th.ID)
			}
			if runs, _ := mem.Runs(ctx, store.RunQuery{}); len(runs) != 0 {
				t.Fatalf("failing after %d rows: %d runs left", fail, len(runs))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := dumpThread(t, s, "th"), dumpThread(t, src, "th"); got != want {
			t.Fatalf("differs:\n%s\nwant:\n%s", got, want)
		}
	}
}

// TestBundleUnfinishedRun: a run still running where the bundle was made
// is imported as interrupted, so that no server of the target resumes it.
func TestBundleUnfinishedRun(t *testing.T) {
	ctx := context.Background()
	src := inmem.Open(store.Options{})
	if _, err := src.CreateThread(ctx, store.Thread{ID: "th"}); err != nil {
		t.Fatal(err)
	}
	rl, _ := store.RunLogOf(src)
	for _, st := range []string{"running", "success"} {
		if err := rl.PutRun(ctx, store.RunRecord{ID: "run-" + st, Thread: "th", Status: st, CreatedAt: 1, UpdatedAt: 2, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := store.ExportBundle(ctx, src, "th", &buf); err != nil {
		t.Fatal(err)
	}
	dst := inmem.Open(store.Options{})
	if _, err := store.ImportBundle(ctx, dst, &buf, store.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	drl, _ := store.RunLogOf(dst)
	for id, want := range map[string]string{"run-running": "interrupted", "run-success": "success"} {
		if r, err := drl.Run(ctx, id); err != nil || r.Status != want {
			t.Fatalf("%s: %+v %v, want %s", id, r, err, want)
		}
	}
}
