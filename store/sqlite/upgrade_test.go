package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

// latestFormat is the format this code writes.
const latestFormat = 8

// writeV1Store writes threads in the current format, then turns the file
// into a format 1 store (the same tables without checksums) and returns
// the expected head state of each thread.
func writeV1Store(t *testing.T, path string) map[string]string {
	t.Helper()
	s := openAt(t, path)
	want := storetest.WriteThreads(t, s, 40, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.Downgrade(t, path, 1)
	return want
}

// acme is the key under which format 7 keeps thread id of tenant acme:
// storetest.WriteThreads writes its threads for acme under their bare
// ids, as the formats before 7 kept them.
func acme(id string) string { return store.ThreadKey("acme", id) }

// bare is the id under which the formats before 7 kept a thread.
func bare(id string) string { return id }

// keyedHeads is want (thread → head state) with each thread under its key.
func keyedHeads(want map[string]string) map[string]string {
	out := map[string]string{}
	for th, w := range want {
		out[acme(th)] = w
	}
	return out
}

func checkHeads(t *testing.T, s store.Store, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	for th, w := range want {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: th})
		if err != nil || cp.State.String() != w {
			t.Fatalf("thread %s: %v", th, err)
		}
		_, id := store.SplitThreadKey(th)
		rec, err := s.Thread(ctx, th)
		if err != nil || rec.Metadata["file"] != id+".md" {
			t.Fatalf("thread %s record: %+v, %v", th, rec, err)
		}
	}
}

// readOnlyAt opens the store at path read-only, runs check on it, closes
// it, and fails unless the file is still at format.
func readOnlyAt(t *testing.T, path string, format int, check func(store.Store)) {
	t.Helper()
	ro, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	ro.Close()
	if v := sqlitetest.Format(t, path); v != format {
		t.Fatalf("a read-only open changed format %d to %d", format, v)
	}
}

// TestUpgradeFormat1 opens a store written before row checksums: read-only
// it reads as before and stays at format 1; read-write it is upgraded, and
// from then on an edited column is caught.
func TestUpgradeFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	want := writeV1Store(t, path)
	readOnlyAt(t, path, 1, func(ro store.Store) { checkHeads(t, ro, want) })
	if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{NoMigrate: true}, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
		t.Fatalf("open without migrating: %v, want ErrMigrationNeeded", err)
	}
	if v := sqlitetest.Format(t, path); v != 1 {
		t.Fatalf("an open without migrating changed the format to %d", v)
	}
	s := openAt(t, path)
	want = keyedHeads(want)
	checkHeads(t, s, want)
	s.Close()
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format after a read-write open: %d", v)
	}
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{NoMigrate: true}, store.Options{})
	if err != nil {
		t.Fatalf("open without migrating, once migrated: %v", err)
	}
	s.Close()
	editColumn(t, path, store.Ref{Thread: acme("a"), Seq: 20}, "parent", int64(3))
	editColumn(t, path, store.Ref{Thread: acme("b")}, "thread.metadata", `{"file":"evil.md"}`)
	s = openAt(t, path)
	defer s.Close()
	ctx := context.Background()
	var ce *store.CorruptError
	if _, err := s.Load(ctx, store.LoadRequest{Thread: acme("a"), Seq: 20}); !errors.As(err, &ce) || ce.Seq != 20 {
		t.Fatalf("edited parent after the upgrade: %v", err)
	}
	if _, err := s.Thread(ctx, acme("b")); !errors.As(err, &ce) || ce.Thread != acme("b") {
		t.Fatalf("edited metadata after the upgrade: %v", err)
	}
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: acme("b")}); err != nil || cp.State.String() != want[acme("b")] {
		t.Fatalf("untouched rows after the upgrade: %v", err)
	}
}

// TestUnversionedTables: an older Cairn that crashed between creating its
// tables and writing the format version left format 1 tables at version
// 0. Read-only they are refused as not (yet) a store; read-write they are
// upgraded like format 1.
func TestUnversionedTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v0.db")
	want := writeV1Store(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: true}, store.Options{}); !errors.Is(err, store.ErrNotStore) {
		t.Fatalf("read-only: %v", err)
	}
	s := openAt(t, path)
	defer s.Close()
	checkHeads(t, s, keyedHeads(want))
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
}

// A store made from the baseline has the layout the migrations make of a
// format 1 store: the same tables with the same columns.
func TestBaselineIsTheMigrations(t *testing.T) {
	dir := t.TempDir()
	fresh, upgraded := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "v1.db")
	s := openAt(t, fresh)
	s.Close()
	writeV1Store(t, upgraded)
	s = openAt(t, upgraded)
	s.Close()
	layout := func(path string) string {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(`SELECT m.name, p.name, p.type, p."notnull", coalesce(p.dflt_value, ''), p.pk FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'
			UNION ALL SELECT name, type, coalesce(sql, ''), 0, '', 0 FROM sqlite_master WHERE type = 'index' OR sql LIKE 'CREATE VIRTUAL%' ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var table, col, typ, dflt string
			var notNull, pk int
			if err := rows.Scan(&table, &col, &typ, &notNull, &dflt, &pk); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(table, col, typ, notNull, dflt, pk))
		}
		return strings.Join(out, "\n")
	}
	if a, b := layout(fresh), layout(upgraded); a != b {
		t.Fatalf("baseline layout:\n%s\n\nmigrated layout:\n%s", a, b)
	}
	if sqlitetest.Format(t, fresh) != sqlitetest.Format(t, upgraded) {
		t.Fatal("baseline and migrated stores have different versions")
	}
}

// TestUpgradeFormat3 opens a store written before items (format 3):
// read-only it reads its threads, holds no items and writes none; with
// auto-migration off it is refused; read-write it gains the items tables
// and keeps its threads.
func TestUpgradeFormat3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	s := openAt(t, path)
	want := storetest.WriteThreads(t, s, 5, nil)
	s.Close()
	sqlitetest.Downgrade(t, path, 3)
	ctx := context.Background()
	readOnlyAt(t, path, 3, func(ro store.Store) {
		checkHeads(t, ro, want)
		ris, err := store.ItemsOf(ro)
		if err != nil {
			t.Fatal(err)
		}
		if items, err := ris.Search(ctx, store.SearchOp{Query: "x"}); err != nil || len(items) != 0 {
			t.Fatalf("search a format 3 store read-only: %v, %v", items, err)
		}
		if _, err := ris.Get(ctx, store.GetOp{Namespace: []string{"a"}, Key: "k"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get from a format 3 store read-only: %v", err)
		}
		if err := ris.Put(ctx, store.PutOp{Namespace: []string{"a"}, Key: "k", Value: map[string]any{}}); !errors.Is(err, store.ErrReadOnly) {
			t.Fatalf("put into a read-only store: %v", err)
		}
	})
	if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{NoMigrate: true}, store.Options{}); !errors.Is(err, store.ErrMigrationNeeded) {
		t.Fatalf("open without migrating: %v", err)
	}
	s = openAt(t, path)
	defer s.Close()
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
	checkHeads(t, s, keyedHeads(want))
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

// writeLanes writes threads a and b (storetest.WriteThreads) and a
// subgraph namespace of a, and returns every namespace's head state.
func writeLanes(t *testing.T, path string) map[store.Ref]string {
	t.Helper()
	s := openAt(t, path)
	defer s.Close()
	want := map[store.Ref]string{}
	for th, w := range storetest.WriteThreads(t, s, 30, nil) {
		want[store.Ref{Thread: th}] = w
	}
	ctx := context.Background()
	doc := state.EmptyDoc()
	for i := int64(0); i < 7; i++ {
		nd, p, err := state.MustSchema().Apply(doc, state.Update{"sub": i})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "a", Namespace: "sub:1", Parent: i, Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
	}
	want[store.Ref{Thread: "a", Namespace: "sub:1"}] = doc.String()
	return want
}

// checkLanes loads every namespace's head and lists a's namespaces, each
// thread under the name key gives it (bare before format 7, acme after).
func checkLanes(t *testing.T, s store.Store, want map[store.Ref]string, key func(string) string) {
	t.Helper()
	ctx := context.Background()
	for ref, w := range want {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: key(ref.Thread), Namespace: ref.Namespace})
		if err != nil || cp.State.String() != w {
			t.Fatalf("%+v: %v", ref, err)
		}
	}
	ns, err := s.Namespaces(ctx, key("a"))
	if err != nil || len(ns) != 2 || ns[0].Head != 30 || ns[1].Name != "sub:1" || ns[1].Head != 7 || ns[1].Checkpoints != 7 {
		t.Fatalf("namespaces of a: %+v, %v", ns, err)
	}
	if th, err := s.Thread(ctx, key("b")); err != nil || th.Head != 30 {
		t.Fatalf("thread b: %+v, %v", th, err)
	}
}

// TestUpgradeFormat4 opens a store whose checkpoint rows are keyed by
// (thread, ns, seq): read-only it reads them in place and stays at format
// 4; read-write every namespace becomes a lane, and its rows read, grow,
// prune and delete as before.
func TestUpgradeFormat4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	want := writeLanes(t, path)
	sqlitetest.Downgrade(t, path, 4)
	readOnlyAt(t, path, 4, func(ro store.Store) { checkLanes(t, ro, want, bare) })
	s := openAt(t, path)
	defer s.Close()
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
	checkLanes(t, s, want, acme)
	ctx := context.Background()
	a, b := acme("a"), acme("b")
	head, err := s.Load(ctx, store.LoadRequest{Thread: a})
	if err != nil {
		t.Fatal(err)
	}
	nd, p, err := state.MustSchema().Apply(head.State, state.Update{"after": true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: a, Parent: 30, Patch: p, State: nd}); err != nil {
		t.Fatalf("append after the upgrade: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: a, Parent: 30, Patch: p, State: nd}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second append on the same parent: %v", err)
	}
	// Every row of b is on its head's chain (one snapshot, at 1): pruning
	// keeps the newest 3 and gives the oldest of them a snapshot.
	if res, err := s.Prune(ctx, store.PruneRequest{Thread: b, KeepLast: 3}); err != nil || res.Checkpoints != 27 || res.Rebased != 1 {
		t.Fatalf("prune after the upgrade: %+v, %v", res, err)
	}
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: b}); err != nil || cp.State.String() != want[store.Ref{Thread: "b"}] {
		t.Fatalf("b after pruning: %v", err)
	}
	if err := s.DeleteThread(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: b}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load a deleted thread: %v", err)
	}
	if got := laneCount(t, path); got != 2 {
		t.Fatalf("%d lanes after deleting b, want a's 2", got)
	}
}

func laneCount(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM lanes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUpgradeSeqBeyondLanes: a format 4 row whose seq does not fit in 32
// bits stops the upgrade with ErrUnsupportedFormat, naming it, and leaves
// the file as it was.
func TestUpgradeSeqBeyondLanes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.db")
	want := writeLanes(t, path)
	sqlitetest.Downgrade(t, path, 4)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE checkpoints SET seq = 4294967296 WHERE thread = 'b' AND seq = 30`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if !errors.Is(err, store.ErrUnsupportedFormat) || !strings.Contains(err.Error(), "4294967296") {
		t.Fatalf("upgrade with a seq beyond 32 bits: %v", err)
	}
	if v := sqlitetest.Format(t, path); v != 4 {
		t.Fatalf("format %d after a refused upgrade", v)
	}
	delete(want, store.Ref{Thread: "b"})
	ro, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{ReadOnly: true}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if cp, err := ro.Load(context.Background(), store.LoadRequest{Thread: "a"}); err != nil || cp.State.String() != want[store.Ref{Thread: "a"}] {
		t.Fatalf("thread a after a refused upgrade: %v", err)
	}
}

// TestSeqRange: a SQLite store refuses a row outside 1 to 2^32-1, or not
// after its parent, before writing anything.
func TestSeqRange(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "r.db"))
	defer s.Close()
	b := s.(*store.Engine).Backend()
	for _, r := range []driver.Row{
		{Thread: "r", Seq: 1 << 32, Parent: 1<<32 - 1, Patch: []byte{}},
		{Thread: "r", Seq: 0, Patch: []byte{}},
		{Thread: "r", Seq: 3, Parent: 3, Patch: []byte{}},
	} {
		if err := b.Insert(context.Background(), r); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("insert seq %d parent %d: %v", r.Seq, r.Parent, err)
		}
	}
	if _, err := s.Thread(context.Background(), "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused row left thread r: %v", err)
	}
}
