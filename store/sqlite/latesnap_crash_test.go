package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/sqlite"
)

var lateSchema = state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("count", state.ReducerReplace))

// proseOf is message i's content: words that compress like prose, so that
// the snapshot policy asks for snapshots often and encoding them takes a
// while.
func proseOf(i int64) string {
	words := strings.Fields("agents argue about state while the quick brown fox jumps over lazy dogs and checkpoints")
	var sb strings.Builder
	for j := range int64(120) {
		sb.WriteString(words[(i*7+j*j*3)%int64(len(words))])
		sb.WriteString(strconv.FormatInt((i*j)%97, 10))
		sb.WriteByte(' ')
	}
	return sb.String()
}

// appendMessages appends a message a step to thread "l" of the store at
// path from its head, printing each committed seq, until killed.
func appendMessages(path string) error {
	ctx := context.Background()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	doc, head := state.EmptyDoc(), int64(0)
	if cp, err := s.Load(ctx, store.LoadRequest{Thread: "l"}); err == nil {
		doc, head = cp.State, cp.Seq
	}
	for {
		i := head + 1
		nd, p, err := lateSchema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint("m", i), Content: proseOf(i)}, "count": i})
		if err != nil {
			return err
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "l", Parent: head, Patch: p, State: nd})
		if err != nil {
			return err
		}
		doc, head = nd, cp.Seq
		fmt.Println(head)
	}
}

// pendingBases counts the rows whose base row has no snapshot: rows
// committed after a late snapshot was asked for and before it was written.
func pendingBases(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	// Keys are lane << 32 | seq: a row's base is in its own lane.
	err = db.QueryRow(`SELECT count(*) FROM checkpoints c JOIN checkpoints b
		ON b.id = (c.id >> 32 << 32) + c.base
		WHERE c.id != b.id AND b.has_snapshot = 0`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkLate loads a checkpoint and checks it holds seq messages.
func checkLate(ctx context.Context, s store.Store, seq int64) error {
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "l", Seq: seq})
	if err != nil {
		return err
	}
	var count int64
	var msgs []state.Message
	if err := cp.State.Get("count", &count); err != nil {
		return err
	}
	if err := cp.State.Get("messages", &msgs); err != nil {
		return err
	}
	if count != seq || int64(len(msgs)) != seq || msgs[seq-1].Content != proseOf(seq) {
		return fmt.Errorf("checkpoint %d holds count %d and %d messages", seq, count, len(msgs))
	}
	return nil
}

// TestKillWithLateSnapshots kills, with SIGKILL at random moments, a
// process whose snapshots are encoded and attached after their rows
// commit, and counts what was lost: every reported commit is there after
// each kill, the rows that name a snapshot the kill left unwritten load
// from the one before, the next process carries on, and a history walk
// writes the snapshots the kills left unwritten.
func TestKillWithLateSnapshots(t *testing.T) {
	crashtest.RunChild("CAIRN_LATE_CHILD", func() error { return appendMessages(os.Getenv("CAIRN_LATE_DB")) })
	if testing.Short() {
		t.Skip("kills processes")
	}
	path := filepath.Join(t.TempDir(), "l.db")
	ctx := context.Background()
	acked, pending := int64(0), 0
	for round := range 15 {
		acked = killAfter(t, "TestKillWithLateSnapshots", []string{"CAIRN_LATE_CHILD=1", "CAIRN_LATE_DB=" + path}, acked, 10+rand.Int64N(100), 2000)
		pending += pendingBases(t, path)
		acked = afterKill(t, path, "l", acked, func(s store.Store, head int64) error {
			for _, seq := range []int64{1, head / 2, head - 1, head} {
				if err := checkLate(ctx, s, max(seq, 1)); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
			return nil
		})
	}
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if walked := walkHistory(t, s, "l", "count"); walked != acked {
		t.Fatalf("the history holds %d checkpoints, want %d", walked, acked)
	}
	// The walk found the snapshots the kills left unwritten, and wrote
	// them: no row names a missing snapshot any more.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := pendingBases(t, path); left != 0 {
		t.Fatalf("%d rows still name an unwritten snapshot after a history walk", left)
	}
	if s, err = sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for seq := int64(1); seq <= acked; seq += 37 {
		if err := checkLate(ctx, s, seq); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("15 kills, %d commits, none lost; %d rows found naming a snapshot a kill left unwritten (counted after each kill), none after the walk", acked, pending)
}

// unattach makes the newest late snapshot of thread "l" unwritten, as a
// process killed before writing it would have left it: the row loses its
// snapshot and its bookkeeping goes back to its parent's base.
func unattach(t *testing.T, s *store.Engine, path string) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Backend().Rows(ctx, driver.RowQuery{Thread: "l"})
	if err != nil {
		t.Fatal(err)
	}
	var r *driver.Row
	for i := len(rows) - 1; i > 0 && r == nil; i-- {
		if rows[i].HasSnapshot {
			r = &rows[i]
		}
	}
	if r == nil {
		t.Fatal("no late snapshot to take back")
	}
	parent := rows[r.Seq-2]
	r.HasSnapshot, r.Base, r.Since, r.BaseSize = false, parent.Base, parent.Since+int64(len(r.Patch)), parent.BaseSize
	r.Sum = driver.RowChecksum(r)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE checkpoints SET has_snapshot = 0, base = ?, since = ?, base_size = ?, crc = ? WHERE id = `+rowKey, r.Base, r.Since, r.BaseSize, int64(r.Sum), "l", "", r.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM snapshots WHERE thread = 'l' AND seq = ?`, r.Seq); err != nil {
		t.Fatal(err)
	}
}

// TestUnwrittenLateSnapshot: a late snapshot left unwritten is read
// through by a store opened read-only without writing anything, and
// written by the first history walk of a store opened for writing.
func TestUnwrittenLateSnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "u.db")
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := state.EmptyDoc()
	for i := int64(1); i <= 200; i++ {
		nd, p, err := lateSchema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint("m", i), Content: proseOf(i)}, "count": i})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "l", Parent: i - 1, Patch: p, State: nd}); err != nil {
			t.Fatal(err)
		}
		doc = nd
	}
	s.WaitSnapshots()
	unattach(t, s, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pending := pendingBases(t, path)
	if pending == 0 {
		t.Fatal("no row names the snapshot taken back")
	}
	var logged bytes.Buffer
	debug := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ro, err := store.Open(ctx, "sqlite:"+path, store.OpenOptions{ReadOnly: true, Store: store.Options{Logger: debug}})
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 200; seq++ {
		if err := checkLate(ctx, ro, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if left := pendingBases(t, path); left != pending {
		t.Fatalf("a read-only store changed the rows naming the snapshot: %d, was %d", left, pending)
	}
	if strings.Contains(logged.String(), "late snapshot") {
		t.Fatalf("a read-only store tried to write a late snapshot:\n%s", logged.String())
	}
	rw, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if walked := walkHistory(t, rw, "l", "count"); walked != 200 {
		t.Fatalf("the history holds %d checkpoints, want 200", walked)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if left := pendingBases(t, path); left != 0 {
		t.Fatalf("%d rows still name the snapshot after a history walk", left)
	}
}
