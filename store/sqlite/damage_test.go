package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// goodStore writes two threads with enough history to span many pages and
// returns the closed file's bytes.
func goodStore(t *testing.T, path string) []byte {
	t.Helper()
	s := openAt(t, path)
	fill(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fill writes threads a and b, 150 checkpoints each.
func fill(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, th := range []string{"a", "b"} {
		doc := state.EmptyDoc()
		for i := int64(0); i < 150; i++ {
			nd, p, err := state.MustSchema().Apply(doc, state.Update{"n": i, "text": fmt.Sprintf("%s-%d-%0300d", th, i, i)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, store.Checkpoint{Thread: th, Namespace: "", Parent: i, Patch: p, State: nd}); err != nil {
				t.Fatal(err)
			}
			doc = nd
		}
	}
}

// useStore runs every kind of read and a write, and returns the errors.
func useStore(s store.Store) []error {
	ctx := context.Background()
	var errs []error
	_, err := s.Thread(ctx, "a")
	errs = append(errs, err)
	for _, err := range s.Threads(ctx, store.ThreadFilter{}) {
		errs = append(errs, err)
	}
	for _, seq := range []int64{0, 1, 75, 150} {
		_, err := s.Load(ctx, store.LoadRequest{Thread: "b", Seq: seq})
		errs = append(errs, err)
	}
	for _, err := range s.History(ctx, store.HistoryRequest{Thread: "a", WithState: true}) {
		if err != nil {
			errs = append(errs, err)
			break
		}
	}
	_, err = s.Namespaces(ctx, "a")
	errs = append(errs, err)
	_, err = s.Writes(ctx, "a", "", 1)
	errs = append(errs, err)
	_, err = s.Append(ctx, store.Checkpoint{Thread: "new", State: state.EmptyDoc()})
	errs = append(errs, err)
	return errs
}

// typed reports whether err is one of the store's typed answers to a
// damaged file; corrupt errors must name the file or the missing table.
func typed(err error, path string) bool {
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		return true
	case errors.Is(err, store.ErrCorrupt), errors.Is(err, store.ErrNotStore):
		return strings.Contains(err.Error(), path)
	}
	return false
}

// TestDamageTypedErrors damages a store in every way the fault-injection
// battery did and checks that opening and using it answer with typed
// errors that name the file: no "disk I/O error", no "no such table".
func TestDamageTypedErrors(t *testing.T) {
	dir := t.TempDir()
	good := goodStore(t, filepath.Join(dir, "good.db"))
	const page = 4096
	type damage struct {
		name string
		// apply damages the file at path before it is opened, or the open
		// store s (then nil before opening).
		before func(t *testing.T, path string)
		after  func(t *testing.T, path string)
		// wantAll: every operation (or the open) must fail with this.
		wantAll error
		// table the error must name
		table string
	}
	var cases []damage
	for cut := page; cut < len(good); cut += 3 * page {
		cases = append(cases, damage{name: fmt.Sprintf("truncated to %d", cut), before: truncate(good, cut)})
	}
	cases = append(cases, damage{name: "truncated mid-page", before: truncate(good, len(good)/2+123)})
	for _, table := range []string{"threads", "checkpoints", "snapshots", "writes"} {
		cases = append(cases,
			damage{name: "dropped " + table, before: dropTable(good, table), wantAll: store.ErrCorrupt, table: table},
			damage{name: "dropped " + table + " while open", before: truncate(good, len(good)), after: dropTable(nil, table), table: table})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			tc.before(t, path)
			s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{SnapshotCache: -1})
			if err != nil {
				if !typed(err, path) || (tc.wantAll != nil && !errors.Is(err, tc.wantAll)) || !strings.Contains(err.Error(), tc.table) {
					t.Fatalf("open: untyped or unnamed error %v", err)
				}
				return
			}
			defer s.Close()
			if tc.wantAll != nil {
				t.Fatalf("open succeeded; want %v", tc.wantAll)
			}
			if tc.after != nil {
				tc.after(t, path)
			}
			failed := 0
			for i, err := range useStore(s) {
				if !typed(err, path) || (err != nil && !strings.Contains(err.Error(), tc.table)) {
					t.Fatalf("operation %d: untyped or unnamed error %v", i, err)
				}
				if err != nil {
					failed++
				}
			}
			if tc.table != "" && failed == 0 {
				t.Fatal("no operation noticed the missing table")
			}
		})
	}
}

// TestTruncatedWALTypedErrors truncates the WAL under an open store (what
// gave "disk I/O error (522)"): every operation answers with a typed error
// naming the file, and so does opening it again.
func TestTruncatedWALTypedErrors(t *testing.T) {
	for _, frac := range []int64{2, 4, 10} {
		t.Run(fmt.Sprintf("1/%d", frac), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{WALPages: 1 << 20}, store.Options{SnapshotCache: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fill(t, s)
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path+"-wal", fi.Size()/frac); err != nil {
				t.Fatal(err)
			}
			failed := 0
			for i, err := range useStore(s) {
				if !typed(err, path) {
					t.Fatalf("operation %d: untyped or unnamed error %v", i, err)
				}
				if errors.Is(err, store.ErrCorrupt) {
					failed++
				}
			}
			if failed == 0 {
				t.Fatal("no operation noticed the truncated WAL")
			}
			s.Close()
			if s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{}); err == nil {
				for i, err := range useStore(s) {
					if !typed(err, path) {
						t.Fatalf("after reopening, operation %d: untyped or unnamed error %v", i, err)
					}
				}
				s.Close()
			} else if !typed(err, path) {
				t.Fatalf("reopen: untyped or unnamed error %v", err)
			}
		})
	}
}

func truncate(good []byte, n int) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		if err := os.WriteFile(path, good[:n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// dropTable writes good to path first when given, then drops a table with
// another connection.
func dropTable(good []byte, table string) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		if good != nil {
			if err := os.WriteFile(path, good, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`DROP TABLE ` + table); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForeignDatabaseRefused: opening another program's SQLite file, even
// read-write, refuses it and leaves it byte-identical.
func TestForeignDatabaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: ro}, store.Options{})
		if !errors.Is(err, store.ErrNotStore) || !strings.Contains(err.Error(), path) {
			t.Fatalf("read-only %v: %v", ro, err)
		}
		after, err := os.ReadFile(path)
		if err != nil || string(after) != string(before) {
			t.Fatalf("read-only %v: the file changed (%v)", ro, err)
		}
	}
}
