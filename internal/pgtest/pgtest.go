package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Env names the variable holding the test server's URL.
const Env = "CAIRN_TEST_POSTGRES"

// Base returns the test server's URL, skipping the test when it is unset.
func Base(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skip(Env + " is not set")
	}
	return base
}

// Schema creates a fresh schema named prefix_<random> for one test, dropped
// when the test ends, and returns the server URL with search_path set to it
// and the schema's name.
func Schema(t testing.TB, prefix string) (dsn, schema string) {
	t.Helper()
	base := Base(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("%s=%s: %v", Env, base, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	schema = prefix + "_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), base); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

// Exec runs statements on the database a DSN names, failing the test on
// the first error.
func Exec(t testing.TB, dsn string, queries ...string) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, dsn)
	defer conn.Close(ctx)
	for _, q := range queries {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// connect connects to the database a DSN names, failing the test if it
// cannot; the caller closes the connection.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// ToFormat1 turns the Cairn store in the schema a DSN names back into
// format 1, as a Cairn of that time wrote it: no row checksums, tables
// without the cairn_ prefix. Migration tests start from it.
func ToFormat1(t testing.TB, dsn string) {
	t.Helper()
	ToFormat5(t, dsn)
	var qs []string
	for _, tb := range []string{"threads", "checkpoints", "snapshots", "writes"} {
		qs = append(qs, `ALTER TABLE cairn_`+tb+` RENAME CONSTRAINT cairn_`+tb+`_pkey TO `+tb+`_pkey`, `ALTER TABLE cairn_`+tb+` RENAME TO `+tb)
	}
	qs = append(qs, `ALTER TABLE threads DROP COLUMN crc`, `ALTER TABLE checkpoints DROP COLUMN crc`, `DROP TABLE cairn_items`, `UPDATE cairn_format SET version = 1`)
	Exec(t, dsn, qs...)
}

// ToFormat6 turns a PostgreSQL store at the latest format into format 6.
// Format 7 changed no table: it moved tenants' threads kept under their
// bare ids to their keys, and the store API still writes a tenant's
// thread under a bare id when given one, as a Cairn of format 6 did; a
// store written so holds what format 6 held, and only its version goes
// back.
func ToFormat6(t testing.TB, dsn string) {
	t.Helper()
	ToFormat7(t, dsn)
	Exec(t, dsn, `UPDATE cairn_format SET version = 6`)
}

// ToFormat7 turns a PostgreSQL store at the latest format into format 7:
// it drops the external ids of checkpoint rows and their index.
func ToFormat7(t testing.TB, dsn string) {
	t.Helper()
	Exec(t, dsn, `DROP INDEX cairn_checkpoints_ext_id`, `ALTER TABLE cairn_checkpoints DROP COLUMN ext_id`, `UPDATE cairn_format SET version = 7`)
}

// ToFormat5 turns a PostgreSQL store at the latest format into format 5:
// it drops the thread index (its tables, indexes and thread columns).
func ToFormat5(t testing.TB, dsn string) {
	t.Helper()
	ToFormat7(t, dsn)
	Exec(t, dsn, `DROP TABLE cairn_thread_meta, cairn_thread_counts, cairn_thread_totals`,
		`DROP INDEX cairn_threads_created, cairn_threads_touched, cairn_threads_status, cairn_threads_status_at`,
		`ALTER TABLE cairn_threads DROP COLUMN status, DROP COLUMN status_at, DROP COLUMN touched_at`,
		`UPDATE cairn_format SET version = 5`)
}

// Bytes returns the content of every row of every table of the
// schema a DSN's search_path names: text as it is, bytea as its bytes,
// other values as Go prints them.
func Bytes(t testing.TB, dsn string) []byte {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, dsn)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		t.Fatalf("tables of the schema: %v %v", names, err)
	}
	var all []byte
	for _, name := range names {
		rows, err := conn.Query(ctx, `SELECT * FROM `+pgx.Identifier{name}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case []byte:
					all = append(all, v...)
				case string:
					all = append(all, v...)
				default:
					all = fmt.Append(all, v)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return all
}
