package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
)

// toSQLiteFormat1 turns a SQLite store back into format 1 (no checksums,
// no items).
func toSQLiteFormat1(t *testing.T, path string) {
	t.Helper()
	sqlitetest.Downgrade(t, path, 1)
}

// wantCLI runs cairn and checks its exit code and that stdout (or stderr,
// for failures) holds every want.
func wantCLI(t *testing.T, code int, want []string, args ...string) string {
	t.Helper()
	got, out, errOut := cli(t, nil, args...)
	text := out
	if code != 0 {
		text = errOut
	}
	if got != code {
		t.Fatalf("cairn %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("cairn %s: %q lacks %q", strings.Join(args, " "), text, w)
		}
	}
	return out
}

// TestMigrateSQLite: status and sql create nothing on a missing store; up
// makes a new store from the baseline and migrates a format 1 store, whose
// threads then read as before.
func TestMigrateSQLite(t *testing.T) {
	dir := t.TempDir()
	fresh := "sqlite:" + filepath.Join(dir, "new", "state.db")
	wantCLI(t, 1, []string{"no store at"}, "migrate", "status", "--store", fresh)
	wantCLI(t, 0, []string{"-- baseline: a new store at format 8", "CREATE TABLE"}, "migrate", "sql", "--store", fresh)
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Fatalf("status or sql created something: %v", err)
	}
	wantCLI(t, 0, []string{"format 0 → 8: baseline"}, "migrate", "up", "--store", fresh)
	wantCLI(t, 0, []string{"0001_tables", "0002_checksums    applied", "0003_runs         applied", "0004_items        applied", "0005_lanes        applied", "0006_thread_index applied", "0007_tenant_keys  applied", "0008_external_ids applied"}, "migrate", "--store", fresh)
	wantCLI(t, 0, []string{"nothing to migrate"}, "migrate", "up", "--store", fresh)

	old := seeded(t)
	before := wantCLI(t, 0, nil, "state", "0", "--store", old)
	toSQLiteFormat1(t, strings.TrimPrefix(old, "sqlite:"))
	wantCLI(t, 0, []string{"format 1, latest 8", "0002_checksums    pending", "0003_runs         pending", "0004_items        pending", "0005_lanes        pending", "0006_thread_index pending", "0007_tenant_keys  pending", "0008_external_ids pending"}, "migrate", "status", "--store", old)
	wantCLI(t, 0, []string{"-- 0002_checksums", "ALTER TABLE threads ADD COLUMN crc", "then a Go step computes the checksum"}, "migrate", "sql", "--store", old)
	wantCLI(t, 0, []string{"format 1 → 8: 0002_checksums, 0003_runs, 0004_items, 0005_lanes, 0006_thread_index, 0007_tenant_keys, 0008_external_ids"}, "migrate", "up", "--store", old)
	if after := wantCLI(t, 0, nil, "state", "0", "--store", old); after != before {
		t.Fatalf("state after the migration:\n%s\nbefore:\n%s", after, before)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown action", []string{"migrate", "down", "--store", fresh}, `migrate "down"`},
		{"a store without migrations", []string{"migrate", "--store", "memory:"}, "no migrations"},
		{"two actions", []string{"migrate", "up", "sql", "--store", fresh}, "accepts at most 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCLI(t, 2, []string{tc.want}, tc.args...) })
	}
}

// TestMigratePostgres: a new schema is version 0 until up; a format 1
// store (unprefixed tables) is refused by read commands with the advice to
// migrate, and reads as before once migrated.
func TestMigratePostgres(t *testing.T) {
	fresh, _ := pgtest.Schema(t, "cairn_mig")
	wantCLI(t, 0, []string{"format 0, latest 8", "0003_prefix       pending", "0004_runs         pending", "0005_items        pending", "0006_thread_index pending", "0007_tenant_keys  pending", "0008_external_ids pending", "cairn migrate up creates one"}, "migrate", "status", "--store", fresh)
	wantCLI(t, 0, []string{"CREATE TABLE IF NOT EXISTS cairn_threads"}, "migrate", "sql", "--store", fresh)
	wantCLI(t, 0, []string{"format 0 → 8: baseline"}, "migrate", "up", "--store", fresh)
	wantCLI(t, 0, []string{"0003_prefix       applied", "0004_runs         applied", "0005_items        applied"}, "migrate", "status", "--store", fresh)

	old, _ := pgtest.Schema(t, "cairn_mig_old")
	wantCLI(t, 0, nil, "bench", "w1", "--steps", "20", "--store", old)
	before := wantCLI(t, 0, nil, "state", "0", "--store", old)
	pgtest.ToFormat1(t, old)
	wantCLI(t, 1, []string{"migration needed", "cairn migrate up"}, "state", "0", "--store", old)
	wantCLI(t, 0, []string{"format 1, latest 8", "0002_checksums    pending", "0003_prefix       pending", "0004_runs         pending", "0005_items        pending", "0006_thread_index pending", "0007_tenant_keys  pending", "0008_external_ids pending"}, "migrate", "status", "--store", old)
	wantCLI(t, 0, []string{"ALTER TABLE threads RENAME TO cairn_threads"}, "migrate", "sql", "--store", old)
	wantCLI(t, 0, []string{"format 1 → 8: 0002_checksums, 0003_prefix, 0004_runs, 0005_items, 0006_thread_index, 0007_tenant_keys, 0008_external_ids"}, "migrate", "up", "--store", old)
	if after := wantCLI(t, 0, nil, "state", "0", "--store", old); after != before {
		t.Fatalf("state after the migration:\n%s\nbefore:\n%s", after, before)
	}
}
