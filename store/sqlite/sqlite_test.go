package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

func openAt(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dbPath(s store.Store) string {
	return s.(*store.Engine).Backend().(*sqlite.Backend).Path()
}

func TestConformance(t *testing.T) { storetest.Run(t, conformanceHarness()) }

// TestConformanceEncrypted runs the suite with encryption at rest.
func TestConformanceEncrypted(t *testing.T) { storetest.RunEncrypted(t, conformanceHarness()) }

func conformanceHarness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, o store.Options) store.Store {
			s, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{}, o)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			path := dbPath(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, path)
		},
		Corrupt: func(t *testing.T, s store.Store, ref store.Ref, column string) {
			db, err := sql.Open("sqlite", dbPath(s)+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var q string
			switch column {
			case "patch":
				q = `UPDATE checkpoints SET patch = substr(patch, 1, length(patch)-1) || x'00' WHERE id = ` + rowKey
			case "snapshot":
				q = `UPDATE snapshots SET data = substr(data, 1, 8) || x'5A' || substr(data, 10) WHERE thread = ? AND ns = ? AND seq = ?`
			case "meta":
				q = `UPDATE checkpoints SET meta = CAST('{"nodes":' AS BLOB) WHERE id = ` + rowKey
			}
			res, err := db.Exec(q, ref.Thread, ref.Namespace, ref.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("corrupt %s of %+v: %d rows", column, ref, n)
			}
		},
		Edit: func(t *testing.T, s store.Store, ref store.Ref, column string, value any) {
			editColumn(t, dbPath(s), ref, column, value)
		},
		Bytes: func(t *testing.T, s store.Store) []byte { return sqlitetest.FileBytes(t, dbPath(s)) },
	}
}

// rowKey is the SQL of a checkpoint row's key, from the parameters
// thread, ns and seq.
const rowKey = `((SELECT id FROM lanes WHERE thread = ? AND ns = ?) << 32 | ?)`

// editColumn changes one column with raw SQL, as storetest.Harness.Edit
// describes.
func editColumn(t *testing.T, path string, ref store.Ref, column string, value any) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table, col, where, args := "checkpoints", column, "id = "+rowKey, []any{ref.Thread, ref.Namespace, ref.Seq}
	switch {
	case column == "thread" || column == "ns":
		// A row's thread and namespace are its lane: the row moves to
		// the lane of the edited value.
		to := store.Ref{Thread: ref.Thread, Namespace: ref.Namespace}
		if column == "thread" {
			to.Thread = value.(string)
		} else {
			to.Namespace = value.(string)
		}
		if _, err := db.Exec(`INSERT OR IGNORE INTO lanes (thread, ns) VALUES (?, ?)`, to.Thread, to.Namespace); err != nil {
			t.Fatal(err)
		}
		set := `id = (SELECT id FROM lanes WHERE thread = ? AND ns = ?) << 32 | ?`
		res, err := db.Exec(`UPDATE checkpoints SET `+set+` WHERE `+where, append([]any{to.Thread, to.Namespace, ref.Seq}, args...)...)
		if err != nil {
			t.Fatalf("edit %s: %v", column, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("edit %s of %+v: %d rows", column, ref, n)
		}
		return
	case column == "seq":
		col = "id"
	case column == "snapshot":
		table, col, where = "snapshots", "data", "thread = ? AND ns = ? AND seq = ?"
	case strings.HasPrefix(column, "thread."):
		table, col, where, args = "threads", strings.TrimPrefix(column, "thread."), "id = ?", []any{ref.Thread}
	}
	set := col + " = ?"
	if inc, ok := value.(storetest.Inc); ok {
		set, value = col+" = "+col+" + ?", int64(inc)
	}
	res, err := db.Exec(`UPDATE `+table+` SET `+set+` WHERE `+where, append([]any{value}, args...)...)
	if err != nil {
		t.Fatalf("edit %s: %v", column, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("edit %s of %+v: %d rows", column, ref, n)
	}
}

func TestDurabilityOption(t *testing.T) {
	if _, err := sqlite.ParseDurability("fast"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad durability: %v", err)
	}
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{Durability: sqlite.DurabilityStrict}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(context.Background(), store.Checkpoint{Thread: "a", State: state.EmptyDoc()}); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedFile checks that a truncated or overwritten database gives a
// typed error, never a panic, and that what is intact stays readable.
func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := openAt(t, path)
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	ctx := context.Background()
	for _, th := range []string{"a", "b"} {
		doc := state.EmptyDoc()
		for i := 1; i <= 300; i++ {
			nd, p, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: th + string(rune('0'+i%10)) + "-" + itoa(i), Content: "some text to fill pages"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, store.Checkpoint{Thread: th, Parent: int64(i - 1), Patch: p, State: nd}); err != nil {
				t.Fatal(err)
			}
			doc = nd
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Truncation.
	if err := os.WriteFile(path, good[:len(good)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	checkTypedErrors(t, path)
	// Garbage over the middle of the file.
	bad := append([]byte(nil), good...)
	for i := len(bad) / 2; i < len(bad)/2+4096 && i < len(bad); i++ {
		bad[i] ^= 0xA5
	}
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	checkTypedErrors(t, path)
	// Not a database at all.
	if err := os.WriteFile(path, []byte("this is not sqlite"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("open garbage: %v", err)
	}
}

func checkTypedErrors(t *testing.T, path string) {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("open damaged file: untyped error %v", err)
		}
		return
	}
	defer s.Close()
	for _, th := range []string{"a", "b"} {
		for _, seq := range []int64{0, 1, 150} {
			_, err := s.Load(context.Background(), store.LoadRequest{Thread: th, Seq: seq})
			if err != nil && !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("load %s@%d on a damaged file: untyped error %v", th, seq, err)
			}
		}
	}
}

func itoa(i int) string {
	b := []byte{}
	for i > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}

func TestNewerFormatRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s := openAt(t, path)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{}); !errors.Is(err, store.ErrUnsupportedFormat) {
		t.Fatalf("newer format: %v", err)
	}
}

// TestGroupCommit checks that commits of different threads arriving
// together share transactions, and that every one of them is durable.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	s := openAt(t, path)
	ctx := context.Background()
	const threads, steps = 32, 20
	errs := make(chan error, threads)
	for i := 0; i < threads; i++ {
		go func() {
			doc := state.EmptyDoc()
			for seq := int64(0); seq < steps; seq++ {
				nd, p, err := state.MustSchema().Apply(doc, state.Update{"n": seq})
				if err != nil {
					errs <- err
					return
				}
				if _, err := s.Append(ctx, store.Checkpoint{Thread: "g" + itoa(i), Parent: seq, Patch: p, State: nd}); err != nil {
					errs <- err
					return
				}
				doc = nd
			}
			errs <- nil
		}()
	}
	for i := 0; i < threads; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := s.(*store.Engine).Backend().(*sqlite.Backend).Stats()
	if st.Jobs < threads*steps || st.Transactions >= st.Jobs {
		t.Fatalf("stats %+v: %d commits were not grouped", st, threads*steps)
	}
	t.Logf("%d jobs in %d transactions", st.Jobs, st.Transactions)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	defer s.Close()
	for i := 0; i < threads; i++ {
		th, err := s.Thread(ctx, "g"+itoa(i))
		if err != nil || th.Head != steps {
			t.Fatalf("thread g%d after reopen: head %d, %v", i, th.Head, err)
		}
	}
}

// TestStaleWriterAfterRecreate: a store whose cached head is stale (another
// process deleted the thread and started it again) gets ErrConflict and
// leaves no row pointing at nothing.
func TestStaleWriterAfterRecreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	a, b := openAt(t, path), openAt(t, path)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	schema := state.MustSchema()
	doc := state.EmptyDoc()
	for i := int64(0); i < 3; i++ {
		nd, p, _ := schema.Apply(doc, state.Update{"n": i})
		if _, err := a.Append(ctx, store.Checkpoint{Thread: "t", Parent: i, Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
	}
	if err := b.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, store.Checkpoint{Thread: "t", State: state.EmptyDoc()}); err != nil {
		t.Fatal(err)
	}
	nd, p, _ := schema.Apply(doc, state.Update{"n": 3})
	if _, err := a.Append(ctx, store.Checkpoint{Thread: "t", Parent: 3, Patch: p, State: nd}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale writer: %v", err)
	}
	n := 0
	for cp, err := range b.History(ctx, store.HistoryRequest{Thread: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if cp.Seq != 1 {
			t.Fatalf("unexpected checkpoint %d", cp.Seq)
		}
	}
	if n != 1 {
		t.Fatalf("%d checkpoints after the stale append", n)
	}
}

// TestBackgroundCheckpoints: commits never checkpoint themselves; the
// background walCopier and the writer's finishing copies keep the WAL
// near WALPages however many commits run, and every row is there after a
// reopen.
func TestBackgroundCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	const walPages, steps = 16, 3000
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{WALPages: walPages}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := state.EmptyDoc()
	pad := strings.Repeat("x", 300)
	maxWAL, last, restarts := int64(0), int64(0), 0
	for seq := int64(0); seq < steps; seq++ {
		nd, p, err := state.MustSchema().Apply(doc, state.Update{"n": seq, "pad": pad + itoa(int(seq))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "c", Parent: seq, Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
		if fi, err := os.Stat(path + "-wal"); err == nil {
			maxWAL = max(maxWAL, fi.Size())
			if fi.Size() < last {
				restarts++ // truncated to journal_size_limit
			}
			last = fi.Size()
		}
	}
	st := s.Backend().(*sqlite.Backend).Stats().WAL
	if st.Runs == 0 || st.Frames == 0 || st.Finishes == 0 || st.Failed != 0 {
		t.Fatalf("checkpoints %+v: want background copies and finishing copies, no failures", st)
	}
	// Without a restart the WAL would hold a page for every commit (12 MB,
	// more with the late snapshots' own transactions); with them it holds
	// what is written between two restarts: WALPages, and what commits add
	// while a copy runs, which depends on how fast the disk syncs (a busy
	// machine's syncs take long enough for thousands of commits; on a quiet
	// one the 3000 commits take a fifth of a second, a few copies' time:
	// restarts are seen by sampling the file's size after each commit, so
	// their count depends on the pace, not on whether copies run).
	if restarts < 2 || maxWAL >= steps*4096 {
		t.Fatalf("the WAL restarted %d times and grew to %d bytes: %+v", restarts, maxWAL, st)
	}
	t.Logf("%+v, %d restarts, largest WAL %d bytes", st, restarts, maxWAL)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openAt(t, path)
	defer r.Close()
	if th, err := r.Thread(ctx, "c"); err != nil || th.Head != steps {
		t.Fatalf("after reopen: head %d, %v", th.Head, err)
	}
}

// TestLargeWALCheckpointedAtOpen: a store opened on a WAL that another
// process left large (it never checkpointed: its limit was high, then it
// stopped) copies that WAL in the background at once, without waiting for
// its own writes to fill one.
func TestLargeWALCheckpointedAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.db")
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{WALPages: 1 << 20}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := state.EmptyDoc()
	pad := strings.Repeat("w", 2000)
	for seq := int64(0); seq < 1200; seq++ {
		nd, p, err := state.MustSchema().Apply(doc, state.Update{"n": seq, "pad": pad + itoa(int(seq))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "w", Parent: seq, Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
	}
	// What a crash leaves: the database and its WAL, copied while the
	// writer is idle.
	crash := filepath.Join(dir, "crash")
	if err := os.MkdirAll(crash, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crash, "w.db"+suffix), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if fi, err := os.Stat(filepath.Join(crash, "w.db-wal")); err != nil || fi.Size() < int64(sqlite.DefaultWALPages)*4096 {
		t.Fatalf("the copied WAL is not large: %v", err)
	}
	r, err := sqlite.OpenStore(context.Background(), filepath.Join(crash, "w.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Backend().(*sqlite.Backend)
	deadline := time.Now().Add(10 * time.Second)
	for b.Stats().WAL.Runs == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := b.Stats().WAL; st.Runs == 0 || st.Frames == 0 {
		t.Fatalf("no background checkpoint after opening a large WAL: %+v", st)
	}
	if th, err := r.Thread(ctx, "w"); err != nil || th.Head != 1200 {
		t.Fatalf("head %d, %v", th.Head, err)
	}
}
