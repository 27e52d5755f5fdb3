package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

// writeFormat5 writes the listing tests' threads with opts, then turns
// the file into a format 5 store (no thread index).
func writeFormat5(t *testing.T, path string, opts store.Options) {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SeedListing(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.Downgrade(t, path, 5)
}

// TestUpgradeFormat5 opens a store written before the thread index:
// read-only it lists threads by id as before (metadata filters through
// the stored JSON) and refuses listings that need the index, staying at
// format 5; read-write it gains the index, filled from every thread's
// metadata and head (interrupted, paused at an interrupt, failed), and
// every listing and count answers as a scan would.
func TestUpgradeFormat5(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v5.db")
	writeFormat5(t, path, store.Options{})
	ctx := context.Background()
	readOnlyAt(t, path, 5, func(ro store.Store) {
		n := 0
		for _, err := range ro.Threads(ctx, store.ThreadFilter{Tenant: "a", Metadata: map[string]any{"user": "u2", "opt": nil}}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 8 {
			t.Fatalf("tenant a, user u2, opt absent or null: %d threads", n)
		}
		if _, err := ro.ListThreads(ctx, store.ThreadSearch{Limit: 10}); !errors.Is(err, store.ErrMigrationNeeded) {
			t.Fatalf("listing a format 5 store read-only: %v", err)
		}
		if _, err := ro.CountThreads(ctx, store.ThreadSearch{}); !errors.Is(err, store.ErrMigrationNeeded) {
			t.Fatalf("counting a format 5 store read-only: %v", err)
		}
	})
	s := openAt(t, path)
	defer s.Close()
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format %d after a read-write open", v)
	}
	storetest.CheckListings(t, s, "upgraded", true)
}

// TestUpgradeFormat5Encrypted: an encrypted store's heads keep their stop
// reason sealed, so the upgrade leaves its finished and paused heads
// unclassified; a listing by status classifies them with the keys first
// (without the keys it fails with ErrNoKey, and a listing that does not
// involve the status answers), and ClassifyThreads finds none left.
func TestUpgradeFormat5Encrypted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v5enc.db")
	ring := storetest.TestKeyring(t, 7)
	writeFormat5(t, path, store.Options{Keyring: ring})
	ctx := context.Background()
	nokey := openAt(t, path)
	b := nokey.(*store.Engine).Backend()
	if ids, err := b.UnclassifiedThreads(ctx, "", 100); err != nil || len(ids) == 0 {
		t.Fatalf("unclassified after the upgrade: %v, %v", ids, err)
	}
	if got, err := nokey.ListThreads(ctx, store.ThreadSearch{Tenant: "a", Limit: 5}); err != nil || len(got) != 5 {
		t.Fatalf("a listing by creation without the keys: %d, %v", len(got), err)
	}
	if _, err := nokey.ListThreads(ctx, store.ThreadSearch{Tenant: "a", Status: []store.ThreadStatus{store.ThreadInterrupted}}); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("a listing by status without the keys: %v", err)
	}
	nokey.Close()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckListings(t, s, "upgraded and classified", true)
	if n, err := s.ClassifyThreads(ctx); err != nil || n != 0 {
		t.Fatalf("classify again: %d, %v", n, err)
	}
}

// TestMigrateThreadIndexCrash kills a process that upgrades a format 5
// store to format 6 at each of its file writes in turn. After every kill
// the file is at format 5 or 6, never between, lists by id read-only, and
// the next read-write open finishes the upgrade: every count and first
// page answers as a scan would.
func TestMigrateThreadIndexCrash(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.db")
	writeFormat5(t, seed, store.Options{})
	seedBytes, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int]int{}
	killEachWrite(t, seedBytes, "migrate", 500, func(path string, n int, _ bool, out []byte) {
		v := sqlitetest.Format(t, path)
		if v != 5 && v != latestFormat {
			t.Fatalf("kill at write %d left format %d (%s)", n, v, out)
		}
		at[v]++
		ro, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: true}, store.Options{})
		if err != nil {
			t.Fatalf("kill at write %d: read-only open: %v", n, err)
		}
		k := 0
		for _, err := range ro.Threads(context.Background(), store.ThreadFilter{}) {
			if err != nil {
				t.Fatalf("kill at write %d: %v", n, err)
			}
			k++
		}
		ro.Close()
		if k != 42 {
			t.Fatalf("kill at write %d: %d threads", n, k)
		}
		s := openAt(t, path)
		storetest.CheckListings(t, s, "after a kill", false)
		s.Close()
	})
	if at[5] == 0 {
		t.Fatalf("no kill landed before the commit: %v", at)
	}
	t.Logf("kills left format 5 %d times, format %d %d times (the last run finished)", at[5], latestFormat, at[latestFormat])
}
