package postgres_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

// migrateEnv, when set to a DSN, makes the test binary open the store
// there read-write, which migrates it, instead of running tests.
const migrateEnv = "CAIRN_PG_TEST_MIGRATE_CHILD"

func migrateChild(dsn string) error {
	s, err := postgres.OpenStore(context.Background(), dsn, postgres.Options{MaxConns: 1}, store.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// writeFormat6Tenants writes the tenant fixture (storetest.TenantKeys)
// with opts, its tenant's thread under its bare id as format 6 kept it,
// and takes the store to format 6.
func writeFormat6Tenants(t *testing.T, dsn string, opts store.Options) *storetest.TenantKeys {
	t.Helper()
	s := open(t, dsn, opts)
	f := storetest.WriteTenantThreads(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pgtest.ToFormat6(t, dsn)
	return f
}

// query runs a query returning one column of int64s.
func query(t *testing.T, dsn, q string, args ...any) []int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func format(t *testing.T, dsn string) int64 {
	t.Helper()
	return query(t, dsn, `SELECT version FROM cairn_format WHERE id = 1`)[0]
}

// TestUpgradeFormat6 opens a format 6 store whose tenant's thread is kept
// under its bare id, plaintext and encrypted: read-only and without
// auto-migration it is refused; read-write the thread moves to its key
// with all it holds, its counters to the shard of its key, and the store,
// read-write and read-only, reads it there (an encrypted one opening the
// blobs sealed under the bare id).
func TestUpgradeFormat6(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts store.Options
	}{
		{"plain", store.Options{}},
		{"encrypted", store.Options{Keyring: storetest.TestKeyring(t, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := schemaDSN(t)
			ctx := context.Background()
			f := writeFormat6Tenants(t, dsn, tc.opts)
			for _, o := range []postgres.Options{{ReadOnly: true}, {NoMigrate: true}} {
				if _, err := postgres.OpenStore(ctx, dsn, o, tc.opts); !errors.Is(err, store.ErrMigrationNeeded) {
					t.Fatalf("open %+v of a format 6 store: %v, want ErrMigrationNeeded", o, err)
				}
			}
			s := open(t, dsn, tc.opts)
			defer s.Close()
			if v := format(t, dsn); v != 8 {
				t.Fatalf("format %d after opening", v)
			}
			f.Check(t, s)
			checkShards(t, dsn)
			ro, err := postgres.OpenStore(ctx, dsn, postgres.Options{ReadOnly: true}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			f.Check(t, ro)
			if err := s.DeleteThread(ctx, storetest.TenantKey); err != nil {
				t.Fatal(err)
			}
			if neg := query(t, dsn, `SELECT n FROM cairn_thread_totals WHERE n <> 0 AND tenant = $1 UNION ALL SELECT n FROM cairn_thread_counts WHERE tenant = $1`, storetest.Tenant); len(neg) != 0 {
				t.Fatalf("the tenant's counters after deleting its thread: %v", neg)
			}
		})
	}
}

// checkShards: the keyed thread is counted in the shard of its key, its
// bare id's shard holds nothing of it.
func checkShards(t *testing.T, dsn string) {
	t.Helper()
	const shards = 16 // the backend's
	want := int64(driver.ShardOf(storetest.TenantKey, shards))
	if driver.ShardOf(storetest.TenantThread, shards) == int(want) {
		t.Fatal("the fixture's id and key share a shard: the test proves nothing")
	}
	if got := query(t, dsn, `SELECT shard::bigint FROM cairn_thread_totals WHERE tenant = $1 AND n <> 0`, storetest.Tenant); len(got) != 1 || got[0] != want {
		t.Fatalf("status counters of the tenant in shards %v, want [%d]", got, want)
	}
	if got := query(t, dsn, `SELECT DISTINCT shard::bigint FROM cairn_thread_counts WHERE tenant = $1`, storetest.Tenant); len(got) != 1 || got[0] != want {
		t.Fatalf("metadata counters of the tenant in shards %v, want [%d]", got, want)
	}
}

// TestUpgradeFormat6Damaged: a row or thread record damaged before the
// migration is still found damaged under the thread's key.
func TestUpgradeFormat6Damaged(t *testing.T) {
	for _, tc := range []struct {
		column string
		ref    store.Ref
		value  any
	}{
		{"parent", store.Ref{Thread: storetest.TenantThread, Seq: 3}, int64(1)},
		{"thread.metadata", store.Ref{Thread: storetest.TenantThread}, `{"file":"evil.md","kind":"chat"}`},
	} {
		t.Run(tc.column, func(t *testing.T) {
			dsn := schemaDSN(t)
			writeFormat6Tenants(t, dsn, store.Options{})
			editColumn(t, dsn, tc.ref, tc.column, tc.value)
			s := open(t, dsn, store.Options{})
			defer s.Close()
			ctx := context.Background()
			var ce *store.CorruptError
			_, err := s.Load(ctx, store.LoadRequest{Thread: storetest.TenantKey, Seq: tc.ref.Seq})
			if tc.ref.Seq == 0 {
				_, err = s.Thread(ctx, storetest.TenantKey)
			}
			if !errors.As(err, &ce) || ce.Thread != storetest.TenantKey || ce.Seq != tc.ref.Seq {
				t.Fatalf("damaged %s after the migration: %v", tc.column, err)
			}
		})
	}
}

// TestUpgradeFormat6KeyTaken: a format 6 store holding a tenant's thread
// under its bare id and another thread under the key it would take is
// refused with ErrConflict naming the key, and left at format 6.
func TestUpgradeFormat6KeyTaken(t *testing.T) {
	dsn := schemaDSN(t)
	ctx := context.Background()
	s := open(t, dsn, store.Options{})
	for _, id := range []string{storetest.TenantThread, storetest.TenantKey} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: storetest.Tenant}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	pgtest.ToFormat6(t, dsn)
	_, err := postgres.OpenStore(ctx, dsn, postgres.Options{}, store.Options{})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), storetest.TenantKey) {
		t.Fatalf("migrating with a key taken: %v", err)
	}
	if v := format(t, dsn); v != 6 {
		t.Fatalf("format %d after a refused migration", v)
	}
	if n := query(t, dsn, `SELECT count(*) FROM cairn_threads WHERE id = ANY($1)`, []string{storetest.TenantThread, storetest.TenantKey}); n[0] != 2 {
		t.Fatalf("%d of the two threads after a refused migration", n[0])
	}
}

// TestMigrateTenantKeysCrash kills a process that upgrades the tenant
// fixture from format 6 at each of its socket writes in turn (strace
// injects SIGKILL on entry to the Nth write), until one finishes or is
// killed after its commit. After every kill the store is at format 6 or
// 7, never between, and once migrated it holds everything.
func TestMigrateTenantKeysCrash(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dsn := schemaDSN(t)
	f := writeFormat6Tenants(t, dsn, store.Options{})
	killed := 0
	for n := 1; ; n++ {
		if n > 300 {
			t.Fatal("the migration never finished under strace")
		}
		cmd := exec.Command(strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=write,sendto,sendmsg",
			"-e", "inject=write,sendto,sendmsg:signal=SIGKILL:when="+strconv.Itoa(n), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), migrateEnv+"="+dsn)
		out, err := cmd.CombinedOutput()
		v := format(t, dsn)
		if v != 6 && v != 8 || v == 6 && err == nil {
			t.Fatalf("run %d (killed: %v) left format %d (%s)", n, err != nil, v, out)
		}
		if v == 8 { // finished, or killed after its commit
			break
		}
		killed++
	}
	if killed == 0 {
		t.Fatal("no kill landed before the commit")
	}
	s := open(t, dsn, store.Options{})
	defer s.Close()
	f.Check(t, s)
	checkShards(t, dsn)
	t.Logf("%d kill points before the commit", killed)
}
