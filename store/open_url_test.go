package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"inmem:", true},
		{"memory:", true},
		{"inmem:x", false},
		{"sqlite:.cairn/state.db", true},
		{"sqlite:///tmp/x.db", true},
		{"sqlite:a.db?durability=strict", true},
		{"sqlite:a.db?durability=fast", false},
		{"sqlite:a.db?cache=1", false},
		{"sqlite:", false},
		{"memory:x", false},
		{"postgres://u@h:5432/db", true},
		{"postgresql://u@h:5432/db", true},
		{"postgres:db", false},
		{"state.db", false},
		{"mysql://x", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			err := store.CheckURL(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckURL(%q) = %v", tc.in, err)
			}
			if err != nil && !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("CheckURL(%q) error not typed: %v", tc.in, err)
			}
		})
	}
}

func TestParseSQLiteURL(t *testing.T) {
	path, d, err := sqlite.ParseURL("sqlite:a.db?durability=strict")
	if err != nil || path != "a.db" || d != sqlite.DurabilityStrict {
		t.Fatalf("ParseURL = %q, %q, %v", path, d, err)
	}
}

func TestOpen(t *testing.T) {
	urls := []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "d", "s.db")}
	if os.Getenv(pgtest.Env) != "" {
		dsn, _ := pgtest.Schema(t, "cairn_open") // a schema of its own: never the shared one's tables
		urls = append(urls, dsn)
	}
	for _, u := range urls {
		s, err := store.Open(context.Background(), u, store.OpenOptions{})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshotDir returns the names and bytes of the files in dir.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func sameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if after[name] != b {
			t.Fatalf("%s changed", name)
		}
	}
}

// TestOpenReadOnlyRefuses: a read-only open creates nothing and changes
// nothing; what is not a Cairn store is refused with a typed error.
func TestOpenReadOnlyRefuses(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.WriteFile(filepath.Join(dir, "empty.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "text.db"), []byte("not a database at all, just text that is long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       error
	}{
		{"missing file", filepath.Join(dir, "typo", "x.db"), store.ErrNotFound},
		{"missing file in an existing directory", filepath.Join(dir, "none.db"), store.ErrNotFound},
		{"another program's database", foreign, store.ErrNotStore},
		{"empty file", filepath.Join(dir, "empty.db"), store.ErrNotStore},
		{"directory", dir, store.ErrNotStore},
		{"not a database", filepath.Join(dir, "text.db"), store.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotDir(t, dir)
			s, err := store.Open(context.Background(), "sqlite:"+tc.path, store.OpenOptions{ReadOnly: true})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("OpenReadOnly(%s) = %v; want %v naming the path", tc.path, err, tc.want)
			}
			sameFiles(t, before, snapshotDir(t, dir))
			if _, err := os.Stat(filepath.Join(dir, "typo")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a directory was created: %v", err)
			}
		})
	}
}

// TestOpenReadOnlyReads: a Cairn store opened read-only reads as usual,
// refuses writes, and its files are byte-identical afterwards.
func TestOpenReadOnlyReads(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "state.db")
	s, err := store.Open(context.Background(), url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc, patch, _ := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"n": 1})
	for _, ns := range []string{"", "gate:1"} {
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "t", Namespace: ns, Patch: patch, State: doc}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	ro, err := store.Open(context.Background(), url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ro.Load(ctx, store.LoadRequest{Thread: "t", Namespace: "gate:1"})
	if err != nil || cp.State.String() != doc.String() {
		t.Fatalf("load: %+v, %v", cp, err)
	}
	if nss, err := ro.Namespaces(ctx, "t"); err != nil || len(nss) != 2 {
		t.Fatalf("namespaces: %+v, %v", nss, err)
	}
	if _, err := ro.Append(ctx, store.Checkpoint{Thread: "t", Parent: 1, Patch: patch, State: doc}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("append on a read-only store: %v", err)
	}
	if _, err := ro.CreateThread(ctx, store.Thread{ID: "u"}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("create on a read-only store: %v", err)
	}
	if _, err := ro.Fork(ctx, store.ForkRequest{Thread: "t", At: 1, Into: "u"}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("fork on a read-only store: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	// The database is byte-identical. SQLite may leave its WAL-index and
	// an empty WAL beside a WAL-mode file: that is how readers coordinate
	// with a writer of another process.
	after := snapshotDir(t, dir)
	for name, b := range after {
		switch {
		case name == "state.db-shm":
		case name == "state.db-wal" && b == "":
		case before[name] != b:
			t.Fatalf("%s changed (%d bytes)", name, len(b))
		}
	}
	if len(after) < len(before) {
		t.Fatal("files went away")
	}
}

// TestOpenReadOnlyPostgres: a schema without Cairn's tables is refused and
// left without them.
func TestOpenReadOnlyPostgres(t *testing.T) {
	pg := os.Getenv("CAIRN_TEST_POSTGRES")
	if pg == "" {
		t.Skip("CAIRN_TEST_POSTGRES is not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("cairn_ro_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	u, _ := neturl.Parse(pg)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if _, err := store.Open(context.Background(), u.String(), store.OpenOptions{ReadOnly: true}); !errors.Is(err, store.ErrNotStore) {
		t.Fatalf("read-only open of an empty schema: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("read-only open created %d tables (%v)", n, err)
	}
	s, err := store.Open(context.Background(), u.String(), store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc, patch, _ := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"n": 1})
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "t", Patch: patch, State: doc}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := store.Open(context.Background(), u.String(), store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if cp, err := ro.Load(ctx, store.LoadRequest{Thread: "t"}); err != nil || cp.State.String() != doc.String() {
		t.Fatalf("load: %v", err)
	}
	if _, err := ro.Append(ctx, store.Checkpoint{Thread: "t", Parent: 1, Patch: patch, State: doc}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("append on a read-only store: %v", err)
	}
}
