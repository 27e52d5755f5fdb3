package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

// schemaDSN creates a fresh schema for one test and returns a DSN whose
// search_path points at it. Without CAIRN_TEST_POSTGRES the test is
// skipped; with it, an unreachable server fails the test.
func schemaDSN(t *testing.T) string {
	t.Helper()
	dsn, _ := pgtest.Schema(t, "cairn_t")
	return dsn
}

func open(t *testing.T, dsn string, o store.Options) store.Store {
	t.Helper()
	s, err := postgres.OpenStore(context.Background(), dsn, postgres.Options{MaxConns: 8}, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, conformanceHarness()) }

// TestConformanceEncrypted runs the suite with encryption at rest.
func TestConformanceEncrypted(t *testing.T) { storetest.RunEncrypted(t, conformanceHarness()) }

func conformanceHarness() storetest.Harness {
	dsns := map[store.Store]string{}
	return storetest.Harness{
		Open: func(t *testing.T, o store.Options) store.Store {
			dsn := schemaDSN(t)
			s := open(t, dsn, o)
			dsns[s] = dsn
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			dsn := dsns[s]
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, dsn, store.Options{})
		},
		Corrupt: func(t *testing.T, s store.Store, ref store.Ref, column string) {
			conn, err := pgx.Connect(context.Background(), dsns[s])
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var q string
			switch column {
			case "patch":
				q = `UPDATE cairn_checkpoints SET patch = overlay(patch placing '\x00'::bytea from length(patch) for 1) WHERE thread = $1 AND ns = $2 AND seq = $3`
			case "snapshot":
				q = `UPDATE cairn_snapshots SET data = overlay(data placing '\x5a'::bytea from 9 for 1) WHERE thread = $1 AND ns = $2 AND seq = $3`
			case "meta":
				q = `UPDATE cairn_checkpoints SET meta = convert_to('{"nodes":', 'UTF8') WHERE thread = $1 AND ns = $2 AND seq = $3`
			}
			tag, err := conn.Exec(context.Background(), q, ref.Thread, ref.Namespace, ref.Seq)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("corrupt %s of %+v: %v (%d rows)", column, ref, err, tag.RowsAffected())
			}
		},
		Edit: func(t *testing.T, s store.Store, ref store.Ref, column string, value any) {
			editColumn(t, dsns[s], ref, column, value)
		},
		Bytes: func(t *testing.T, s store.Store) []byte { return pgtest.Bytes(t, dsns[s]) },
	}
}

// editColumn changes one column with raw SQL, as storetest.Harness.Edit
// describes.
func editColumn(t *testing.T, dsn string, ref store.Ref, column string, value any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table, col, where, args := "cairn_checkpoints", column, "thread = $2 AND ns = $3 AND seq = $4", []any{ref.Thread, ref.Namespace, ref.Seq}
	switch {
	case column == "snapshot":
		table, col = "cairn_snapshots", "data"
	case strings.HasPrefix(column, "thread."):
		table, col, where, args = "cairn_threads", strings.TrimPrefix(column, "thread."), "id = $2", []any{ref.Thread}
	}
	set := col + " = $1"
	switch v := value.(type) {
	case storetest.Inc:
		set, value = col+" = "+col+" + $1", int64(v)
	case string:
		if col == "metadata" {
			set = col + " = $1::jsonb"
		}
	}
	tag, err := conn.Exec(ctx, `UPDATE `+table+` SET `+set+` WHERE `+where, append([]any{value}, args...)...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("edit %s of %+v: %v (%d rows)", column, ref, err, tag.RowsAffected())
	}
}
