package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// appendStep appends one step to a thread's head under ctx (which may
// carry a fence).
func appendStep(ctx context.Context, s store.Store, thread string, n int) error {
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	doc, parent := state.Doc{}, int64(0)
	switch {
	case err == nil:
		doc, parent = head.State, head.Seq
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	next, patch, err := state.MustSchema(state.WithField("n", state.ReducerReplace)).Apply(doc, state.Update{"n": n})
	if err != nil {
		return err
	}
	_, err = s.Append(ctx, store.Checkpoint{Thread: thread, Parent: parent, Nodes: []string{"step"}, Patch: patch, State: next})
	return err
}

// testLeases checks leases and fenced appends: a held lease refuses
// another owner, an expired one is taken over with a new token that is
// never reused, and an append, renewal or release carrying a taken-over
// token fails with ErrFenced, writing nothing.
func testLeases(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	ls, err := store.LeasesOf(s)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ls.Acquire(ctx, "t", "a", time.Hour)
	if err != nil || a.Token != 1 {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	if _, err := ls.Acquire(ctx, "t", "b", time.Hour); !errors.Is(err, store.ErrLeaseHeld) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a held lease: %v", err)
	}
	if a, err = ls.Acquire(ctx, "t", "a", 10*time.Millisecond); err != nil || a.Token != 2 {
		t.Fatalf("the owner again: %+v, %v", a, err)
	}
	if err := appendStep(store.WithFence(ctx, "t", a.Token), s, "t", 1); err != nil {
		t.Fatalf("append under the lease: %v", err)
	}
	if err := appendStep(store.WithFence(ctx, "t", 1), s, "t", 2); !errors.Is(err, store.ErrFenced) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append with an old token: %v", err)
	}
	checkTakeOver(t, s, ls, a)
	if l, err := ls.Lease(ctx, "none"); err != nil || l.Token != 0 {
		t.Fatalf("no lease: %+v, %v", l, err)
	}
	checkLeaseRace(t, ls)
	checkFencedConcurrently(t, s, ls)
}

// checkTakeOver: owner a's lease expires; b takes it over with a new
// token; a's late append, renewal and release are fenced; b's are not;
// after b releases, the next token still grows.
func checkTakeOver(t *testing.T, s store.Store, ls store.LeaseStore, a store.Lease) {
	ctx := context.Background()
	time.Sleep(20 * time.Millisecond)
	b, err := ls.Acquire(ctx, "t", "b", time.Hour)
	if err != nil || b.Token != 3 || b.Owner != "b" {
		t.Fatalf("take over an expired lease: %+v, %v", b, err)
	}
	if err := appendStep(store.WithFence(ctx, "t", a.Token), s, "t", 3); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's late append: %v", err)
	}
	if _, err := ls.Renew(ctx, a, time.Hour); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner renews: %v", err)
	}
	if err := ls.Release(ctx, a); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner releases: %v", err)
	}
	if err := appendStep(store.WithFence(ctx, "t", b.Token), s, "t", 4); err != nil {
		t.Fatalf("the new owner appends: %v", err)
	}
	if th, err := s.Thread(ctx, "t"); err != nil || th.Head != 2 {
		t.Fatalf("head %d (%v): fenced appends must write nothing", th.Head, err)
	}
	if b, err = ls.Renew(ctx, b, time.Hour); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := ls.Release(ctx, b); err != nil {
		t.Fatalf("release: %v", err)
	}
	if c, err := ls.Acquire(ctx, "t", "c", time.Hour); err != nil || c.Token != 4 {
		t.Fatalf("after a release the token goes on: %+v, %v", c, err)
	}
}

// checkLeaseRace: owners racing for one free lease: exactly one wins.
func checkLeaseRace(t *testing.T, ls store.LeaseStore) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Go(func() {
			_, err := ls.Acquire(context.Background(), "race", fmt.Sprint("owner", i), time.Hour)
			switch {
			case err == nil:
				mu.Lock()
				won++
				mu.Unlock()
			case !errors.Is(err, store.ErrLeaseHeld):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d owners won one lease", won)
	}
}

// checkFencedConcurrently appends to 12 threads at once, each under its
// lease, while thread f0's lease is taken over: its appends are refused,
// the others' all land.
func checkFencedConcurrently(t *testing.T, s store.Store, ls store.LeaseStore) {
	ctx := context.Background()
	leases := map[string]store.Lease{}
	for i := range 12 {
		th := fmt.Sprint("f", i)
		l, err := ls.Acquire(ctx, th, "w", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leases[th] = l
	}
	if _, err := ls.Acquire(ctx, "f0", "w", time.Hour); err != nil { // a restarted owner: a new token
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for th, l := range leases {
		wg.Go(func() {
			fctx := store.WithFence(ctx, th, l.Token)
			for n := range 10 {
				err := appendStep(fctx, s, th, n)
				if th == "f0" && !errors.Is(err, store.ErrFenced) {
					t.Errorf("f0 append %d: %v, want fenced", n, err)
				}
				if th != "f0" && err != nil {
					t.Errorf("%s append %d: %v", th, n, err)
				}
			}
		})
	}
	wg.Wait()
	for th := range leases {
		got, err := s.Thread(ctx, th)
		if want := int64(10); th == "f0" {
			if !errors.Is(err, store.ErrNotFound) && got.Head != 0 {
				t.Errorf("f0 has head %d", got.Head)
			}
		} else if err != nil || got.Head != want {
			t.Errorf("%s: head %d, %v", th, got.Head, err)
		}
	}
}
