package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

func testForkTree(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "tree")
	for i := 1; i <= 20; i++ {
		m.step(i)
	}
	forkBranch(t, s, m)
	// Continue the branch, then check every checkpoint of both branches.
	for i := 22; i <= 40; i++ {
		m.step(i)
	}
	for seq := int64(1); seq <= 40; seq++ {
		m.checkLoad(seq)
	}
	checkTree(t, s, m)
	// Appending to the old branch tip is a conflict: only the head grows.
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "tree", Parent: 20, State: m.doc}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append to old tip: %v", err)
	}
	// Fork into a new thread.
	nt, err := s.Fork(ctx, store.ForkRequest{Thread: "tree", At: 30, Into: "tree-copy"})
	if err != nil {
		t.Fatal(err)
	}
	if nt.Thread != "tree-copy" || nt.Seq != 1 {
		t.Fatalf("fork into = %+v", nt)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "tree-copy"})
	if err != nil || cp.State.String() != m.want[30] {
		t.Fatalf("forked thread state: %v", err)
	}
	checkRefusedForks(t, s)
}

// forkBranch forks thread "tree" at 8 with a changed count: the fork is
// checkpoint 21, the model's new head.
func forkBranch(t *testing.T, s store.Store, m *model) {
	t.Helper()
	change, err := state.ParsePatch([]byte(`[{"op":"replace","path":"/count","value":-5}]`))
	if err != nil {
		t.Fatal(err)
	}
	fk, err := s.Fork(context.Background(), store.ForkRequest{Thread: "tree", At: 8, Patch: change})
	if err != nil {
		t.Fatal(err)
	}
	if fk.Seq != 21 || fk.Parent != 8 || fk.Meta.Source != "fork" || fk.Meta.ForkedFrom.Seq != 8 {
		t.Fatalf("fork = %+v", fk)
	}
	want8, _ := state.ParseDoc([]byte(m.want[8]))
	want21, err := want8.Apply(change)
	if err != nil {
		t.Fatal(err)
	}
	m.want[21] = want21.String()
	m.head, m.doc = 21, want21
	m.ids = messageIDs(t, want21)
}

// checkTree checks that the old branch is untouched and history lists the
// whole tree.
func checkTree(t *testing.T, s store.Store, m *model) {
	t.Helper()
	parents := map[int64]int64{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "tree", WithState: true, PageSize: 6}) {
		if err != nil {
			t.Fatal(err)
		}
		parents[cp.Seq] = cp.Parent
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("history seq %d state differs", cp.Seq)
		}
	}
	if len(parents) != 40 || parents[21] != 8 || parents[22] != 21 || parents[9] != 8 {
		t.Fatalf("tree parents wrong: %v", parents)
	}
}

// checkRefusedForks: forks into an existing thread, from a missing seq or
// with a patch that does not apply are refused and move nothing.
func checkRefusedForks(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	bad, _ := state.ParsePatch([]byte(`[{"op":"remove","path":"/nope"}]`))
	for _, tc := range []struct {
		name string
		req  store.ForkRequest
		want error
	}{
		{"into an existing thread", store.ForkRequest{Thread: "tree", At: 30, Into: "tree-copy"}, store.ErrConflict},
		{"at a missing seq", store.ForkRequest{Thread: "tree", At: 99}, store.ErrNotFound},
		{"with a patch that does not apply", store.ForkRequest{Thread: "tree", At: 3, Patch: bad}, store.ErrInvalidArgument},
	} {
		if _, err := s.Fork(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Fatalf("fork %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if th, _ := s.Thread(ctx, "tree"); th.Head != 40 {
		t.Fatalf("failed forks moved the head to %d", th.Head)
	}
}
