package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// SeedForkSource writes the thread the fork crash tests fork from: "src"
// (tenant acme, metadata file agent.md) with five checkpoints, each
// scheduling node "step". It returns the state at checkpoint 3, which a
// fork of src at 3 must hold.
func SeedForkSource(t testing.TB, s store.Store) (state3 string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateThread(ctx, store.Thread{ID: "src", Tenant: "acme", Metadata: map[string]any{"file": "agent.md"}}); err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema()
	doc := state.EmptyDoc()
	for i := int64(0); i < 5; i++ {
		nd, p, err := schema.Apply(doc, state.Update{"n": i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "src", Parent: i, Patch: p, State: nd, Meta: store.Meta{Next: []string{"step"}}}); err != nil {
			t.Fatal(err)
		}
		if doc = nd; i == 2 {
			state3 = nd.String()
		}
	}
	return state3
}

// CheckForkAfterKill checks a store after a process forking src at 3 into
// "copy" was killed at its nth write (finished: it was not): either there
// is no thread "copy" and a retried fork succeeds, or the whole fork is
// there — never an empty thread. In both cases "copy" then holds state3
// with its schedule, and src is unchanged. It reports whether the kill
// left no thread.
func CheckForkAfterKill(t testing.TB, s store.Store, n int, finished bool, out []byte, state3 string) (leftNone bool) {
	t.Helper()
	ctx := context.Background()
	th, err := s.Thread(ctx, "copy")
	switch {
	case errors.Is(err, store.ErrNotFound):
		if finished {
			t.Fatalf("write %d: the fork finished (%s) but left no thread", n, out)
		}
		leftNone = true
		if _, err := s.Fork(ctx, store.ForkRequest{Thread: "src", At: 3, Into: "copy"}); err != nil {
			t.Fatalf("write %d: retrying the fork: %v", n, err)
		}
	case err != nil:
		t.Fatalf("write %d: %v", n, err)
	case th.Head != 1 || th.Tenant != "acme" || th.Metadata["file"] != "agent.md":
		t.Fatalf("write %d: killed fork left thread %+v", n, th)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "copy"})
	if err != nil || cp.State.String() != state3 || len(cp.Meta.Next) != 1 {
		t.Fatalf("write %d: forked checkpoint %+v: %v", n, cp, err)
	}
	if src, err := s.Thread(ctx, "src"); err != nil || src.Head != 5 {
		t.Fatalf("write %d: source thread %+v, %v", n, src, err)
	}
	return leftNone
}

// WriteThreads writes threads "a" and "b" (tenant acme, metadata extra
// plus file <id>.md), each with steps checkpoints of about 250 bytes of
// text, so that they have snapshots and patches; it returns each thread's
// head state. The format upgrade tests write their old stores with it.
func WriteThreads(t testing.TB, s store.Store, steps int, extra map[string]any) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	for _, th := range []string{"a", "b"} {
		meta := map[string]any{"file": th + ".md"}
		for k, v := range extra {
			meta[k] = v
		}
		if _, err := s.CreateThread(ctx, store.Thread{ID: th, Tenant: "acme", Metadata: meta}); err != nil {
			t.Fatal(err)
		}
		doc := state.EmptyDoc()
		for i := int64(0); i < int64(steps); i++ {
			nd, p, err := state.MustSchema().Apply(doc, state.Update{"n": i, "text": fmt.Sprintf("%s %d %0200d", th, i, i)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, store.Checkpoint{Thread: th, Parent: i, Patch: p, State: nd}); err != nil {
				t.Fatal(err)
			}
			doc = nd
		}
		want[th] = doc.String()
	}
	return want
}
