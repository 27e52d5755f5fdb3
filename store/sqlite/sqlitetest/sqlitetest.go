package sqlitetest

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the driver the store uses
)

// unlane keys the checkpoint rows of a format 5 file by (thread, ns, seq)
// again, as formats 1 to 4 do, and drops the lanes.
var unlane = []string{
	`CREATE TABLE checkpoints_keyed (
	thread       TEXT NOT NULL,
	ns           TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	parent       INTEGER NOT NULL,
	base         INTEGER NOT NULL,
	since        INTEGER NOT NULL,
	base_size    INTEGER NOT NULL,
	status       INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	has_snapshot INTEGER NOT NULL,
	meta         BLOB,
	patch        BLOB NOT NULL,
	crc          INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (thread, ns, seq)
) WITHOUT ROWID`,
	`INSERT INTO checkpoints_keyed SELECT l.thread, l.ns, c.id - (l.id << 32), c.parent, c.base, c.since, c.base_size, c.status, c.created_at, c.has_snapshot, c.meta, c.patch, c.crc
	FROM checkpoints c JOIN lanes l ON l.id = c.id >> 32`,
	`DROP TABLE checkpoints`,
	`DROP TABLE lanes`,
	`ALTER TABLE checkpoints_keyed RENAME TO checkpoints`,
}

// unindex drops the thread index of format 6.
var unindex = []string{
	`DROP TABLE thread_meta`, `DROP TABLE thread_counts`, `DROP TABLE thread_totals`,
	`DROP INDEX threads_created`, `DROP INDEX threads_touched`, `DROP INDEX threads_status`, `DROP INDEX threads_status_at`,
	`ALTER TABLE threads DROP COLUMN status`, `ALTER TABLE threads DROP COLUMN status_at`, `ALTER TABLE threads DROP COLUMN touched_at`,
}

// steps are the statements that take a file of format v to format v-1.
// Format 7 changed no table: it moved tenants' threads kept under their
// bare ids to their keys. The store API still writes a thread of a tenant
// under a bare id when given one (store.Thread{ID: "x", Tenant: "acme"}),
// as every Cairn of format 6 did, so a file written so holds what format 6
// held, and only its version goes back.
var steps = map[int][]string{
	8: {`DROP INDEX checkpoints_ext_id`, `ALTER TABLE checkpoints DROP COLUMN ext_id`},
	7: {},
	6: unindex,
	5: unlane,
	4: {`DROP TABLE items`, `DROP TABLE item_text`},
	3: {`DROP TABLE run_events`, `DROP TABLE runs`, `DROP TABLE api_keys`, `DROP TABLE leases`},
	2: {`ALTER TABLE threads DROP COLUMN crc`, `ALTER TABLE checkpoints DROP COLUMN crc`},
}

// Downgrade turns the closed SQLite store at path, written at the latest
// format, into a store of format (1 to 7), as the Cairn of that format
// wrote it: the same rows in that format's tables. Threads of tenants
// kept under their keys stay so (see steps): a store to be taken below
// format 7 with its tenants' threads as format 6 kept them is written
// with bare ids.
func Downgrade(t testing.TB, path string, format int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v := version(t, db)
	if format < 1 || format >= v || steps[v] == nil {
		t.Fatalf("sqlitetest: cannot take format %d to %d", v, format)
	}
	for ; v > format; v-- {
		for _, q := range steps[v] {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("sqlitetest: format %d to %d: %s: %v", v, v-1, q, err)
			}
		}
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, format)); err != nil {
		t.Fatal(err)
	}
}

// Format reads the format of the SQLite store at path (its user_version).
func Format(t testing.TB, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return version(t, db)
}

func version(t testing.TB, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// FileBytes returns every byte of a database file and of its journals
// (WAL, rollback journal, shared memory) as they are on disk.
func FileBytes(t testing.TB, path string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-journal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}
