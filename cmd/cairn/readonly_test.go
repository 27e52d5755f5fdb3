package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"
)

// readCommands are the commands that only read a store.
func readCommands(dir string) [][]string {
	return [][]string{
		{"threads"},
		{"state", "t"},
		{"history", "t"},
		{"history", "t", "--tree"},
		{"namespaces", "t"},
		{"export", "t", "--format", "trace", "--dir", filepath.Join(dir, "trace")},
		{"export", "t", "--format", "session-log", "--dir", filepath.Join(dir, "logs")},
		{"fork", "t", "--at", "1"},
		{"resume", "t"},
		{"prune", "--keep", "1"},
	}
}

// TestReadCommandsCreateNothing: read commands (and fork, resume, prune,
// which need an existing store) on a missing store create no file and no
// folder, with the default store or a mistyped --store.
func TestReadCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range readCommands(dir) {
		for _, store := range []string{"", "sqlite:" + filepath.Join(dir, "typo", "x.db")} {
			a := args
			if store != "" {
				a = append([]string{"--store", store}, args...)
			}
			code, _, errOut := cli(t, nil, a...)
			if code != 1 || !strings.Contains(errOut, "no store at") {
				t.Errorf("%v: exit %d %s", a, code, errOut)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Fatalf("%v created %v", a, entries)
			}
		}
	}
}

// TestReadCommandsRefuseForeignDatabase: on another program's SQLite file
// every command that needs a store refuses it and leaves it byte for byte.
func TestReadCommandsRefuseForeignDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('Ada')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range readCommands(dir) {
		a := append([]string{"--store", "sqlite:" + path}, args...)
		code, _, errOut := cli(t, nil, a...)
		if code != 1 || !strings.Contains(errOut, "not a Cairn store") {
			t.Errorf("%v: exit %d %s", a, code, errOut)
		}
		after, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(before, after) {
			t.Fatalf("%v changed the foreign database", a)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("%v left files: %v", a, entries)
		}
	}
}

// TestReadCommandsPostgres: on a Postgres schema without Cairn's tables,
// read commands refuse it and create no table.
func TestReadCommandsPostgres(t *testing.T) {
	url, schema := pgtest.Schema(t, "cairn_cli")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	dir := t.TempDir()
	for _, args := range readCommands(dir) {
		code, _, errOut := cli(t, nil, append([]string{"--store", url}, args...)...)
		if code != 1 {
			t.Errorf("%v: exit %d %s", args, code, errOut)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%v created %d tables (%v)", args, n, err)
		}
	}
}

// TestThreadsListsPastADamagedRecord: a thread record edited outside
// Cairn is reported by name, the other threads are still listed, and the
// command exits 1.
func TestThreadsListsPastADamagedRecord(t *testing.T) {
	dir := copyExample(t)
	path := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + path}
	for _, th := range []string{"a", "b", "c"} {
		if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "business-extract.md"), "--input-text", "Acme Anvils GmbH, Berlin", "--thread", th); code != 0 {
			t.Fatalf("run %s: %d %s", th, code, errOut)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE threads SET tenant = 'someone-else' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errOut := cli(t, env, "threads")
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		listed = append(listed, strings.Fields(line)[0])
	}
	if code != 1 || strings.Join(listed, ",") != "a,c" || !strings.Contains(errOut, `thread "b"`) {
		t.Fatalf("threads with a damaged record: exit %d, listed %v\n%s\n%s", code, listed, out, errOut)
	}
}
