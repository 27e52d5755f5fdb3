package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/storetest"
)

// writeV1Store writes threads in the current format, then turns the file
// into a format 1 store (the same tables without checksums) and returns
// the expected head state of each thread.
func writeV1Store(t *testing.T, path string) map[string]string {
	t.Helper()
	s := openAt(t, path)
	want := storetest.WriteThreads(t, s, 40, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`ALTER TABLE threads DROP COLUMN crc`, `ALTER TABLE checkpoints DROP COLUMN crc`, `PRAGMA user_version = 1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func checkHeads(t *testing.T, s store.Store, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	for th, w := range want {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: th})
		if err != nil || cp.State.String() != w {
			t.Fatalf("thread %s: %v", th, err)
		}
		rec, err := s.Thread(ctx, th)
		if err != nil || rec.Metadata["file"] != th+".md" {
			t.Fatalf("thread %s record: %+v, %v", th, rec, err)
		}
	}
}

// TestUpgradeFormat1 opens a store written before row checksums: read-only
// it reads as before and stays at format 1; read-write it is upgraded, and
// from then on an edited column is caught.
func TestUpgradeFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	want := writeV1Store(t, path)
	ro, err := sqlite.OpenStore(path, sqlite.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkHeads(t, ro, want)
	ro.Close()
	if v := userVersion(t, path); v != 1 {
		t.Fatalf("a read-only open changed the format to %d", v)
	}
	s := openAt(t, path)
	checkHeads(t, s, want)
	s.Close()
	if v := userVersion(t, path); v != 2 {
		t.Fatalf("format after a read-write open: %d", v)
	}
	editColumn(t, path, store.Ref{Thread: "a", Seq: 20}, "parent", int64(3))
	editColumn(t, path, store.Ref{Thread: "b"}, "thread.metadata", `{"file":"evil.md"}`)
	s = openAt(t, path)
	defer s.Close()
	ctx := context.Background()
	var ce *store.CorruptError
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "a", Seq: 20}); !errors.As(err, &ce) || ce.Seq != 20 {
		t.Fatalf("edited parent after the upgrade: %v", err)
	}
	if _, err := s.Thread(ctx, "b"); !errors.As(err, &ce) || ce.Thread != "b" {
		t.Fatalf("edited metadata after the upgrade: %v", err)
	}
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: "b"}); err != nil || cp.State.String() != want["b"] {
		t.Fatalf("untouched rows after the upgrade: %v", err)
	}
}

// TestUnversionedTables: an older Cairn that crashed between creating its
// tables and writing the format version left format 1 tables at version
// 0. Read-only they are refused as not (yet) a store; read-write they are
// upgraded like format 1.
func TestUnversionedTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v0.db")
	want := writeV1Store(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.OpenStore(path, sqlite.Options{ReadOnly: true}, store.Options{}); !errors.Is(err, store.ErrNotStore) {
		t.Fatalf("read-only: %v", err)
	}
	s := openAt(t, path)
	defer s.Close()
	checkHeads(t, s, want)
	if v := userVersion(t, path); v != 2 {
		t.Fatalf("format %d after opening", v)
	}
}
