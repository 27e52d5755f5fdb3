package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

func execSQL(t *testing.T, dsn string, queries ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range queries {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestUpgradeFormat1 opens a database written before row checksums:
// read-only it reads as before, read-write it is upgraded, and from then
// on an edited column is caught.
func TestUpgradeFormat1(t *testing.T) {
	dsn := schemaDSN(t)
	ctx := context.Background()
	s := open(t, dsn, store.Options{})
	want := storetest.WriteThreads(t, s, 30, map[string]any{"n": 1e2}) // jsonb rewrites 1e2 as 100
	s.Close()
	execSQL(t, dsn, `ALTER TABLE threads DROP COLUMN crc`, `ALTER TABLE checkpoints DROP COLUMN crc`, `UPDATE cairn_format SET version = 1`)
	check := func(s store.Store) {
		t.Helper()
		for th, w := range want {
			cp, err := s.Load(ctx, store.LoadRequest{Thread: th})
			if err != nil || cp.State.String() != w {
				t.Fatalf("thread %s: %v", th, err)
			}
			if rec, err := s.Thread(ctx, th); err != nil || rec.Metadata["file"] != th+".md" {
				t.Fatalf("thread %s record: %+v, %v", th, rec, err)
			}
		}
	}
	ro, err := postgres.OpenStore(ctx, dsn, postgres.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	ro.Close()
	s = open(t, dsn, store.Options{})
	check(s)
	s.Close()
	editColumn(t, dsn, store.Ref{Thread: "a", Seq: 20}, "parent", int64(3))
	editColumn(t, dsn, store.Ref{Thread: "b"}, "thread.metadata", `{"file":"evil.md","n":100}`)
	s = open(t, dsn, store.Options{})
	defer s.Close()
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
