package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

// acme is the key under which format 7 keeps thread id of tenant acme:
// storetest.WriteThreads writes its threads for acme under their bare
// ids, as the formats before 7 kept them.
func acme(id string) string { return store.ThreadKey("acme", id) }

// TestUpgradeFormat1 opens a database written before row checksums and
// table prefixes: read-only it is refused (reading it would need a
// migration) and changed in nothing; with auto-migration off it is
// refused too; read-write it is migrated, every thread reads as before,
// and from then on an edited column is caught.
func TestUpgradeFormat1(t *testing.T) {
	dsn := schemaDSN(t)
	ctx := context.Background()
	s := open(t, dsn, store.Options{})
	want := storetest.WriteThreads(t, s, 30, map[string]any{"n": 1e2}) // jsonb rewrites 1e2 as 100
	s.Close()
	pgtest.ToFormat1(t, dsn)
	check := func(s store.Store) {
		t.Helper()
		for th, w := range want {
			cp, err := s.Load(ctx, store.LoadRequest{Thread: acme(th)})
			if err != nil || cp.State.String() != w {
				t.Fatalf("thread %s: %v", th, err)
			}
			if rec, err := s.Thread(ctx, acme(th)); err != nil || rec.Metadata["file"] != th+".md" {
				t.Fatalf("thread %s record: %+v, %v", th, rec, err)
			}
		}
	}
	for _, o := range []postgres.Options{{ReadOnly: true}, {NoMigrate: true}} {
		if _, err := postgres.OpenStore(ctx, dsn, o, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
			t.Fatalf("open %+v of a format 1 store: %v, want ErrMigrationNeeded", o, err)
		}
	}
	pgtest.Exec(t, dsn, `SELECT 1 FROM threads LIMIT 1`) // still format 1: nothing was migrated
	s = open(t, dsn, store.Options{})
	check(s)
	s.Close()
	ro, err := postgres.OpenStore(ctx, dsn, postgres.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	ro.Close()
	editColumn(t, dsn, store.Ref{Thread: acme("a"), Seq: 20}, "parent", int64(3))
	editColumn(t, dsn, store.Ref{Thread: acme("b")}, "thread.metadata", `{"file":"evil.md","n":100}`)
	s = open(t, dsn, store.Options{})
	defer s.Close()
	var ce *store.CorruptError
	if _, err := s.Load(ctx, store.LoadRequest{Thread: acme("a"), Seq: 20}); !errors.As(err, &ce) || ce.Seq != 20 {
		t.Fatalf("edited parent after the upgrade: %v", err)
	}
	if _, err := s.Thread(ctx, acme("b")); !errors.As(err, &ce) || ce.Thread != acme("b") {
		t.Fatalf("edited metadata after the upgrade: %v", err)
	}
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: acme("b")}); err != nil || cp.State.String() != want["b"] {
		t.Fatalf("untouched rows after the upgrade: %v", err)
	}
}

// A Cairn store shares its schema with another program's tables named
// like Cairn's own before format 3.
func TestSharedSchema(t *testing.T) {
	dsn := schemaDSN(t)
	pgtest.Exec(t, dsn, `CREATE TABLE threads (id int PRIMARY KEY, title text)`, `INSERT INTO threads VALUES (1, 'theirs')`)
	s := open(t, dsn, store.Options{})
	storetest.WriteThreads(t, s, 3, nil)
	s.Close()
	pgtest.Exec(t, dsn, `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM threads WHERE id = 1 AND title = 'theirs') THEN RAISE EXCEPTION 'their row is gone'; END IF; END $$`)
}

// layout lists the tables, columns and constraints of the schema a DSN's
// search path names.
func layout(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') || ' ' || coalesce(collation_name, '')
		FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL SELECT table_name || ' ' || constraint_type || ' ' || constraint_name
		FROM information_schema.table_constraints WHERE table_schema = current_schema() AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY')
		UNION ALL SELECT replace(indexdef, current_schema() || '.', '') FROM pg_indexes WHERE schemaname = current_schema()
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// A store made from the baseline has the layout the migrations make of a
// format 1 store.
func TestBaselineIsTheMigrations(t *testing.T) {
	fresh, old := schemaDSN(t), schemaDSN(t)
	open(t, fresh, store.Options{}).Close()
	s := open(t, old, store.Options{})
	storetest.WriteThreads(t, s, 3, nil)
	s.Close()
	pgtest.ToFormat1(t, old)
	open(t, old, store.Options{}).Close()
	if a, b := layout(t, fresh), layout(t, old); a != b || a == "" {
		t.Fatalf("baseline layout:\n%s\n\nmigrated layout:\n%s", a, b)
	}
}

// TestUpgradeFormat4 opens a store written before items (format 4):
// read-only and without auto-migration it is refused, changed in nothing;
// read-write it gains the items table and keeps its threads.
func TestUpgradeFormat4(t *testing.T) {
	dsn := schemaDSN(t)
	ctx := context.Background()
	s := open(t, dsn, store.Options{})
	want := storetest.WriteThreads(t, s, 5, nil)
	s.Close()
	pgtest.Exec(t, dsn, `DROP TABLE cairn_items`, `UPDATE cairn_format SET version = 4`)
	for _, o := range []postgres.Options{{ReadOnly: true}, {NoMigrate: true}} {
		if _, err := postgres.OpenStore(ctx, dsn, o, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
			t.Fatalf("open %+v of a format 4 store: %v, want ErrMigrationNeeded", o, err)
		}
	}
	pgtest.Exec(t, dsn, `DO $$ BEGIN IF to_regclass('cairn_items') IS NOT NULL THEN RAISE EXCEPTION 'migrated'; END IF; END $$`)
	s = open(t, dsn, store.Options{})
	defer s.Close()
	for th, w := range want {
		if cp, err := s.Load(ctx, store.LoadRequest{Thread: acme(th)}); err != nil || cp.State.String() != w {
			t.Fatalf("thread %s after the upgrade: %v", th, err)
		}
	}
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
