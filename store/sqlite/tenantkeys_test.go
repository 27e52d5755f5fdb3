package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

// writeFormat6Tenants writes the tenant fixture (storetest.TenantKeys) at
// path with opts, its tenant's thread under its bare id as format 6 kept
// it, and takes the file to format 6.
func writeFormat6Tenants(t *testing.T, path string, opts store.Options) *storetest.TenantKeys {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.WriteTenantThreads(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.Downgrade(t, path, 6)
	return f
}

func openWith(t *testing.T, path string, o sqlite.Options, opts store.Options) store.Store {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUpgradeFormat6 opens a format 6 store whose tenant's thread is kept
// under its bare id, plaintext and encrypted: read-only it reads it there
// and stays at format 6; read-write the thread moves to its key with all
// it holds, and the store, read-write and read-only, reads it there (an
// encrypted one opening the blobs sealed under the bare id).
func TestUpgradeFormat6(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts store.Options
	}{
		{"plain", store.Options{}},
		{"encrypted", store.Options{Keyring: storetest.TestKeyring(t, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v6.db")
			f := writeFormat6Tenants(t, path, tc.opts)
			readOnlyAt(t, path, 6, func(ro store.Store) {
				if th, err := ro.Thread(context.Background(), storetest.TenantThread); err != nil || th.Tenant != storetest.Tenant {
					t.Fatalf("format 6 read-only: %+v, %v", th, err)
				}
			})
			if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{NoMigrate: true}, tc.opts); !errors.Is(err, store.ErrMigrationNeeded) {
				t.Fatalf("open without migrating: %v", err)
			}
			s := openWith(t, path, sqlite.Options{}, tc.opts)
			if v := sqlitetest.Format(t, path); v != latestFormat {
				t.Fatalf("format %d after opening", v)
			}
			f.Check(t, s)
			s.Close()
			ro := openWith(t, path, sqlite.Options{ReadOnly: true}, tc.opts)
			defer ro.Close()
			f.Check(t, ro)
		})
	}
}

// TestUpgradeFormat6Damaged: a row or thread record damaged before the
// migration is still found damaged under the thread's key, and the rest
// reads.
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
			path := filepath.Join(t.TempDir(), "v6.db")
			writeFormat6Tenants(t, path, store.Options{})
			editColumn(t, path, tc.ref, tc.column, tc.value)
			s := openAt(t, path)
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
			if _, err := s.Load(ctx, store.LoadRequest{Thread: storetest.TenantKey, Seq: 2}); tc.ref.Seq != 0 && err != nil {
				t.Fatalf("an undamaged row after the migration: %v", err)
			}
		})
	}
}

// TestUpgradeFormat6KeyTaken: a format 6 store holding a tenant's thread
// under its bare id and another thread under the key it would take is
// refused with ErrConflict naming the key, and left at format 6 as it
// was.
func TestUpgradeFormat6KeyTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	s := openAt(t, path)
	ctx := context.Background()
	for _, id := range []string{storetest.TenantThread, storetest.TenantKey} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: storetest.Tenant}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	sqlitetest.Downgrade(t, path, 6)
	_, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), storetest.TenantKey) {
		t.Fatalf("migrating with a key taken: %v", err)
	}
	readOnlyAt(t, path, 6, func(ro store.Store) {
		for _, id := range []string{storetest.TenantThread, storetest.TenantKey} {
			if _, err := ro.Thread(ctx, id); err != nil {
				t.Fatalf("thread %s after a refused migration: %v", id, err)
			}
		}
	})
}

// TestMigrateTenantKeysCrash kills a process that upgrades the tenant
// fixture from format 6 at each of its file writes in turn. After every
// kill the file is at format 6 or 7, never between: read-only it holds the
// tenant's thread under its bare id or its key, and the next read-write
// open finishes the upgrade with nothing lost.
func TestMigrateTenantKeysCrash(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.db")
	f := writeFormat6Tenants(t, seed, store.Options{})
	seedBytes, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int]int{}
	killEachWrite(t, seedBytes, "migrate", 500, func(path string, n int, _ bool, out []byte) {
		v := sqlitetest.Format(t, path)
		if v != 6 && v != latestFormat {
			t.Fatalf("kill at write %d left format %d (%s)", n, v, out)
		}
		at[v]++
		id := map[int]string{6: storetest.TenantThread, latestFormat: storetest.TenantKey}[v]
		readOnlyAt(t, path, v, func(ro store.Store) {
			if th, err := ro.Thread(context.Background(), id); err != nil || th.Head != 20 {
				t.Fatalf("kill at write %d: format %d read-only: thread %s: %+v, %v", n, v, id, th, err)
			}
		})
		s := openAt(t, path)
		f.Check(t, s)
		s.Close()
	})
	if at[6] == 0 {
		t.Fatalf("no kill landed before the commit: %v", at)
	}
	t.Logf("kills left format 6 %d times, format %d %d times (the last run finished)", at[6], latestFormat, at[latestFormat])
}

// moveRun sets the thread of run id, as stored, to thread.
func moveRun(t *testing.T, path, id, thread string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.Exec(`UPDATE runs SET thread = ? WHERE id = ?`, thread, id); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("run %s: %d rows", id, n)
	}
}

// TestRekeyKeyedThreads: after the migration an encrypted store's blobs
// of the keyed thread are still sealed under its bare id (its run's
// record, moved back there, opens); cairn rekey, with the same key, seals
// them again under the key — every checkpoint, snapshot, pending write and
// run of the thread, nothing else — after which the record no longer opens
// under the bare id, everything reads under the key, and a second rekey
// rewrites nothing.
func TestRekeyKeyedThreads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	opts := store.Options{Keyring: storetest.TestKeyring(t, 1), SnapshotCache: -1}
	f := writeFormat6Tenants(t, path, opts)
	s := openWith(t, path, sqlite.Options{}, opts)
	defer s.Close()
	ctx := context.Background()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	moveRun(t, path, "rx", storetest.TenantThread)
	if _, err := rl.Run(ctx, "rx"); err != nil {
		t.Fatalf("a migrated run's record under the bare id, before rekey: %v", err)
	}
	moveRun(t, path, "rx", storetest.TenantKey)
	st, err := s.(*store.Engine).Rekey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.Rewritten; w["checkpoints"] != 25 || w["snapshots"] == 0 || w["writes"] != 1 || w["runs"] != 1 || w["events"] != 0 || w["items"] != 0 || st.Changed != 0 {
		t.Fatalf("rekey of the migrated store: %+v", st)
	}
	if again, err := s.(*store.Engine).Rekey(ctx); err != nil || len(again.Rewritten) != 0 {
		t.Fatalf("second rekey: %+v, %v", again, err)
	}
	moveRun(t, path, "rx", storetest.TenantThread)
	var ce *store.CorruptError
	if _, err := rl.Run(ctx, "rx"); !errors.As(err, &ce) {
		t.Fatalf("a rekeyed run's record under the bare id: %v, want it refused", err)
	}
	moveRun(t, path, "rx", storetest.TenantKey)
	f.Check(t, s)
}
