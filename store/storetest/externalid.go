package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// testExternalIDs: a checkpoint is found by its external id in its own
// thread namespace (the newest of two with one id), with the metadata it
// was written with; a fork, a copy and a reopened store keep it (the
// suite's encrypted run: an encrypted store too); a pruned or deleted checkpoint is no longer found.
func testExternalIDs(t *testing.T, h Harness) {
	s := open(t, h)
	x, err := store.ExternalIDsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	writeExternalIDs(t, s)
	checkExternalIDs(t, x, "x")
	if _, err := s.CopyThread(context.Background(), "x", "x-copy"); err != nil {
		t.Fatal(err)
	}
	checkExternalIDs(t, x, "x-copy")
	if h.Reopen != nil {
		s = h.Reopen(t, s)
		t.Cleanup(func() { _ = s.Close() })
		if x, err = store.ExternalIDsOf(s); err != nil {
			t.Fatal(err)
		}
		checkExternalIDs(t, x, "x")
	}
	checkExternalIDsGone(t, s, x)
}

// writeExternalIDs writes thread x: ids c1..c5 in the root namespace
// (c3 twice: seq 3 and the fork at seq 6), c1 in namespace "sub".
func writeExternalIDs(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	d := state.EmptyDoc()
	for i := 1; i <= 5; i++ {
		p := state.Patch{{Op: state.OpReplace, Path: "/count", Value: []byte(fmt.Sprint(i))}}
		if i == 1 {
			p[0].Op = state.OpAdd
		}
		nd, err := d.Apply(p)
		if err != nil {
			t.Fatal(err)
		}
		d = nd
		id := fmt.Sprintf("c%d", i)
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "x", Parent: int64(i - 1), Patch: p, State: d, ExternalID: id, Meta: store.Meta{Source: id}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "x", At: 2, ExternalID: "c3", Meta: store.Meta{Source: "fork"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "x", Namespace: "sub", Patch: state.Patch{}, State: state.EmptyDoc(), ExternalID: "c1"}); err != nil {
		t.Fatal(err)
	}
	long := store.Checkpoint{Thread: "x", Parent: 6, Patch: state.Patch{}, State: d, ExternalID: strings.Repeat("i", store.MaxExternalID+1)}
	if _, err := s.Append(ctx, long); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("an external id of %d bytes: %v", len(long.ExternalID), err)
	}
}

func checkExternalIDs(t *testing.T, x store.ExternalIDs, thread string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		ns, id string
		seq    int64
		source string
	}{{"", "c1", 1, "c1"}, {"", "c5", 5, "c5"}, {"", "c3", 6, "fork"}, {"sub", "c1", 1, ""}} {
		cp, err := x.ByExternalID(ctx, thread, c.ns, c.id)
		if err != nil || cp.Seq != c.seq || cp.ExternalID != c.id || cp.Meta.Source != c.source || cp.HasState {
			t.Fatalf("%s %q %q: seq %d %q source %q state %v, %v; want seq %d source %q", thread, c.ns, c.id, cp.Seq, cp.ExternalID, cp.Meta.Source, cp.HasState, err, c.seq, c.source)
		}
	}
	for _, c := range [][2]string{{"", "c9"}, {"sub", "c2"}, {"other", "c1"}, {"", ""}} {
		if cp, err := x.ByExternalID(ctx, thread, c[0], c[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s %q %q: %+v, %v; want ErrNotFound", thread, c[0], c[1], cp, err)
		}
	}
	if _, err := x.ByExternalID(ctx, "nobody", "", "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing thread: %v", err)
	}
}

// checkExternalIDsGone prunes x to its newest checkpoints and deletes
// its copy.
func checkExternalIDsGone(t *testing.T, s store.Store, x store.ExternalIDs) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Prune(ctx, store.PruneRequest{Thread: "x", KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.ByExternalID(ctx, "x", "", "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("c1 after a prune: %v", err)
	}
	if cp, err := x.ByExternalID(ctx, "x", "", "c3"); err != nil || cp.Seq != 6 {
		t.Fatalf("the fork c3 after a prune: %+v, %v", cp, err)
	}
	if err := s.DeleteThread(ctx, "x-copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.ByExternalID(ctx, "x-copy", "", "c5"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("c5 of a deleted thread: %v", err)
	}
}
