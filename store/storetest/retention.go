package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// branchedThread builds thread id: a main line 1..40; a branch forked at
// 10 (seq 41) grown to 50, whose tip 50 is paused (interrupted) with
// pending writes; the main line forked again at its tip 40 (seq 51) and
// grown to the head 60, which failed with pending writes of the tasks
// that succeeded. It returns the model (want holds every seq's state).
func branchedThread(t *testing.T, s store.Store, id string) *model {
	t.Helper()
	ctx := context.Background()
	m := newModel(t, s, id)
	for i := 1; i <= 40; i++ {
		m.step(i)
	}
	forkAt := func(at int64) {
		fk, err := s.Fork(ctx, store.ForkRequest{Thread: id, At: at})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := state.ParseDoc([]byte(m.want[at]))
		if err != nil {
			t.Fatal(err)
		}
		m.head, m.doc, m.want[fk.Seq], m.ids = fk.Seq, doc, m.want[at], messageIDs(t, doc)
	}
	forkAt(10)
	for i := 42; i <= 49; i++ {
		m.step(i)
	}
	pause := func(status store.Status, task string) {
		cp, err := s.Append(ctx, store.Checkpoint{Thread: id, Parent: m.head, State: m.doc, Status: status, Meta: store.Meta{Source: "step", Next: []string{"step"}}})
		if err != nil {
			t.Fatal(err)
		}
		m.head, m.want[cp.Seq] = cp.Seq, m.doc.String()
		if err := s.PutWrites(ctx, id, "", cp.Seq, []store.Write{{Task: task, Node: "tool", Update: json.RawMessage(`{"done":true}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	pause(store.StatusInterrupted, "approve")
	forkAt(40)
	for i := 52; i <= 59; i++ {
		m.step(i)
	}
	pause(store.StatusFailed, "search")
	if m.head != 60 {
		t.Fatalf("the branched thread's head is %d, want 60", m.head)
	}
	return m
}

// checkAll loads every checkpoint the thread has left and compares it
// with the model; it returns the seqs left.
func checkAll(t *testing.T, s store.Store, m *model, thread string) []int64 {
	t.Helper()
	var left []int64
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread, WithState: true}) {
		if err != nil {
			t.Fatalf("history of %s: %v", thread, err)
		}
		if got := cp.State.String(); got != m.want[cp.Seq] {
			t.Fatalf("%s checkpoint %d after retention:\n got %.200s\nwant %.200s", thread, cp.Seq, got, m.want[cp.Seq])
		}
		left = append(left, cp.Seq)
	}
	slices.Sort(left)
	return left
}

// testPruneBranches: keep-last N keeps the newest N checkpoints of every
// branch (the head, a paused branch, an old fork's tip) and deletes the
// others, and keeps the pending writes of the paused and failed tips;
// every checkpoint left rebuilds to its exact state; the thread goes on.
func testPruneBranches(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := branchedThread(t, s, "branches")
	res, err := s.Prune(ctx, store.PruneRequest{Thread: "branches", KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The newest 3 of each branch, and nothing else: the branch forked at
	// 10 (41..50) and the line forked at 40 (51..60) no longer keep the
	// main line's snapshot and patches (1..40) they replayed from.
	left := checkAll(t, s, m, "branches")
	if fmt.Sprint(left) != "[48 49 50 58 59 60]" {
		t.Fatalf("keep-last 3 left %v, want the newest 3 of each branch", left)
	}
	if res.Checkpoints == 0 || res.Checkpoints != int64(60-len(left)) || res.Bytes <= 0 || res.Threads != 1 {
		t.Fatalf("prune = %+v with %d left", res, len(left))
	}
	for seq, task := range map[int64]string{50: "approve", 60: "search"} {
		ws, err := s.Writes(ctx, "branches", "", seq)
		if err != nil || len(ws) != 1 || ws[0].Task != task {
			t.Fatalf("pending writes of %d after prune: %v %+v", seq, err, ws)
		}
	}
	// Pruning again finds nothing more; the thread still grows.
	if res, err := s.Prune(ctx, store.PruneRequest{Thread: "branches", KeepLast: 3}); err != nil || res.Checkpoints != 0 {
		t.Fatalf("second prune = %+v, %v", res, err)
	}
	m.step(61)
	m.checkLoad(0)
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "branches", At: 49}); err != nil {
		t.Fatalf("fork at the paused branch after prune: %v", err)
	}
	if _, err := s.Prune(ctx, store.PruneRequest{KeepLast: -1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative keep: %v", err)
	}
}

// testPruneWhileWriting: a prune racing a writer never deletes what the
// writer's new checkpoints need: every checkpoint left rebuilds.
func testPruneWhileWriting(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "busy")
	for i := 1; i <= 20; i++ {
		m.step(i)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 21; i <= 120; i++ {
			m.step(i)
		}
	})
	for range 30 {
		if _, err := s.Prune(ctx, store.PruneRequest{Thread: "busy", KeepLast: 2}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	checkAll(t, s, m, "busy")
	m.checkLoad(0)
}

// testExpiry: OlderThan and each thread's own time to live delete idle
// threads whole — not a thread paused for an answer, nor one with a run
// pending — and nothing else.
func testExpiry(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	mk := func(id string, md map[string]any, steps int) {
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Metadata: md}); err != nil {
			t.Fatal(err)
		}
		m := newModel(t, s, id)
		for i := 1; i <= steps; i++ {
			m.step(i)
		}
	}
	mk("ttl-short", map[string]any{store.ThreadTTLKey: "1h"}, 3)
	mk("ttl-minutes", map[string]any{store.ThreadTTLKey: 30}, 2)
	mk("ttl-long", map[string]any{store.ThreadTTLKey: "720h"}, 2)
	mk("ttl-none", nil, 2)
	mk("ttl-empty", map[string]any{store.ThreadTTLKey: "1h"}, 0)
	mk("ttl-paused", map[string]any{store.ThreadTTLKey: "1h"}, 1)
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ttl-paused", Parent: 1, State: state.Doc{}, Status: store.StatusInterrupted}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Hour)
	res, err := s.Prune(ctx, store.PruneRequest{Expired: true, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Deleted)
	if fmt.Sprint(res.Deleted) != "[ttl-empty ttl-minutes ttl-short]" || fmt.Sprint(res.Busy) != "[ttl-paused]" {
		t.Fatalf("expired: deleted %v, busy %v", res.Deleted, res.Busy)
	}
	for _, id := range []string{"ttl-long", "ttl-none", "ttl-paused"} {
		if _, err := s.Thread(ctx, id); err != nil {
			t.Fatalf("%s was deleted: %v", id, err)
		}
	}
	if res, err := s.Prune(ctx, store.PruneRequest{OlderThan: time.Hour, Now: later}); err != nil || fmt.Sprint(res.Deleted) != "[ttl-long ttl-none]" {
		t.Fatalf("older than an hour: %+v, %v", res, err)
	}
	if _, err := s.Thread(ctx, "ttl-paused"); err != nil {
		t.Fatalf("the paused thread went: %v", err)
	}
}

// testCopyThread: a copy has the source's whole history (every branch,
// every checkpoint's exact state, the pending writes), tenant and
// metadata; a copy of a pruned thread rebuilds too; copying onto an
// existing thread changes nothing.
func testCopyThread(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	if _, err := s.CreateThread(ctx, store.Thread{ID: "orig", Tenant: "acme", Metadata: map[string]any{"kind": "agent"}}); err != nil {
		t.Fatal(err)
	}
	m := branchedThread(t, s, "orig")
	for _, tc := range []struct {
		name, to string
		prune    bool
	}{{"whole", "orig-copy", false}, {"pruned", "orig-pruned-copy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prune {
				if _, err := s.Prune(ctx, store.PruneRequest{Thread: "orig", KeepLast: 2}); err != nil {
					t.Fatal(err)
				}
			}
			th, err := s.CopyThread(ctx, "orig", tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if th.Tenant != "acme" || th.Head != 60 || fmt.Sprint(th.Metadata) != "map[kind:agent]" {
				t.Fatalf("copy = %+v", th)
			}
			if got, want := checkAll(t, s, m, tc.to), checkAll(t, s, m, "orig"); !slices.Equal(got, want) {
				t.Fatalf("the copy has %v, the source %v", got, want)
			}
			ws, err := s.Writes(ctx, tc.to, "", 50)
			if err != nil || len(ws) != 1 || ws[0].Task != "approve" {
				t.Fatalf("the copy's pending writes: %v %+v", err, ws)
			}
		})
	}
	if _, err := s.CopyThread(ctx, "orig", "orig-copy"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("copy onto an existing thread: %v", err)
	}
	if _, err := s.CopyThread(ctx, "nope", "nope-copy"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("copy of a missing thread: %v", err)
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "blank"}); err != nil {
		t.Fatal(err)
	}
	if th, err := s.CopyThread(ctx, "blank", "blank-copy"); err != nil || th.Head != 0 {
		t.Fatalf("copy of an empty thread: %+v %v", th, err)
	}
}
