package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
)

// migrateChild opens the store at path read-write, which migrates it.
func migrateChild(path string) error {
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// TestMigrateLanesCrash kills a process that upgrades a format 4 store to
// format 5 at each of its file writes in turn (strace injects SIGKILL on
// entry to the Nth pwrite64). After every kill the file is at format 4 or
// 5, never between, reads every namespace's head read-only as it stands,
// and the next read-write open finishes the upgrade with every head intact.
func TestMigrateLanesCrash(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.db")
	want := writeLanes(t, seed)
	sqlitetest.Downgrade(t, seed, 4)
	seedBytes, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int]int{}
	killEachWrite(t, seedBytes, "migrate", 500, func(path string, n int, _ bool, out []byte) {
		v := sqlitetest.Format(t, path)
		if v != 4 && v != latestFormat {
			t.Fatalf("kill at write %d left format %d (%s)", n, v, out)
		}
		at[v]++
		ro, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: true}, store.Options{})
		if err != nil {
			t.Fatalf("kill at write %d: read-only open: %v", n, err)
		}
		key := bare
		if v == latestFormat {
			key = acme
		}
		checkLanes(t, ro, want, key)
		ro.Close()
		s := openAt(t, path)
		checkLanes(t, s, want, acme)
		s.Close()
		if v := sqlitetest.Format(t, path); v != latestFormat {
			t.Fatalf("kill at write %d: format %d after a read-write open", n, v)
		}
	})
	if at[4] == 0 {
		t.Fatalf("no kill landed before the commit: %v", at)
	}
	t.Logf("kills left format 4 %d times, format %d %d times (the last run finished)", at[4], latestFormat, at[latestFormat])
}
