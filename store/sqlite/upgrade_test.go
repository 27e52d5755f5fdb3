package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

// latestFormat is the format this code writes.
const latestFormat = 5

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
	sqlitetest.Downgrade(t, path, 1)
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
	if _, err := sqlite.OpenStore(path, sqlite.Options{NoMigrate: true}, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
		t.Fatalf("open without migrating: %v, want ErrMigrationNeeded", err)
	}
	if v := userVersion(t, path); v != 1 {
		t.Fatalf("an open without migrating changed the format to %d", v)
	}
	s := openAt(t, path)
	checkHeads(t, s, want)
	s.Close()
	if v := userVersion(t, path); v != latestFormat {
		t.Fatalf("format after a read-write open: %d", v)
	}
	s, err = sqlite.OpenStore(path, sqlite.Options{NoMigrate: true}, store.Options{})
	if err != nil {
		t.Fatalf("open without migrating, once migrated: %v", err)
	}
	s.Close()
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
	if v := userVersion(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
}

// A store made from the baseline has the layout the migrations make of a
// format 1 store: the same tables with the same columns.
func TestBaselineIsTheMigrations(t *testing.T) {
	dir := t.TempDir()
	fresh, upgraded := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "v1.db")
	s := openAt(t, fresh)
	s.Close()
	writeV1Store(t, upgraded)
	s = openAt(t, upgraded)
	s.Close()
	layout := func(path string) string {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(`SELECT m.name, p.name, p.type, p."notnull", coalesce(p.dflt_value, ''), p.pk FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'
			UNION ALL SELECT name, type, coalesce(sql, ''), 0, '', 0 FROM sqlite_master WHERE type = 'index' OR sql LIKE 'CREATE VIRTUAL%' ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var table, col, typ, dflt string
			var notNull, pk int
			if err := rows.Scan(&table, &col, &typ, &notNull, &dflt, &pk); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(table, col, typ, notNull, dflt, pk))
		}
		return strings.Join(out, "\n")
	}
	if a, b := layout(fresh), layout(upgraded); a != b {
		t.Fatalf("baseline layout:\n%s\n\nmigrated layout:\n%s", a, b)
	}
	if userVersion(t, fresh) != userVersion(t, upgraded) {
		t.Fatal("baseline and migrated stores have different versions")
	}
}

// TestUpgradeFormat3 opens a store written before items (format 3):
// read-only it reads its threads, holds no items and writes none; with
// auto-migration off it is refused; read-write it gains the items tables
// and keeps its threads.
func TestUpgradeFormat3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	s := openAt(t, path)
	want := storetest.WriteThreads(t, s, 5, nil)
	s.Close()
	sqlitetest.Downgrade(t, path, 3)
	ctx := context.Background()
	ro, err := sqlite.OpenStore(path, sqlite.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkHeads(t, ro, want)
	ris, err := store.ItemsOf(ro)
	if err != nil {
		t.Fatal(err)
	}
	if items, err := ris.Search(ctx, store.SearchOp{Query: "x"}); err != nil || len(items) != 0 {
		t.Fatalf("search a format 3 store read-only: %v, %v", items, err)
	}
	if _, err := ris.Get(ctx, store.GetOp{Namespace: []string{"a"}, Key: "k"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get from a format 3 store read-only: %v", err)
	}
	if err := ris.Put(ctx, store.PutOp{Namespace: []string{"a"}, Key: "k", Value: map[string]any{}}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("put into a read-only store: %v", err)
	}
	ro.Close()
	if _, err := sqlite.OpenStore(path, sqlite.Options{NoMigrate: true}, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
		t.Fatalf("open without migrating: %v", err)
	}
	s = openAt(t, path)
	defer s.Close()
	if v := userVersion(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
	checkHeads(t, s, want)
	is, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := is.Put(ctx, store.PutOp{Namespace: []string{"a"}, Key: "k", Value: map[string]any{"text": "migrated store"}}); err != nil {
		t.Fatal(err)
	}
	if items, err := is.Search(ctx, store.SearchOp{Query: "migrated"}); err != nil || len(items) != 1 {
		t.Fatalf("search after the upgrade: %v, %v", items, err)
	}
}
