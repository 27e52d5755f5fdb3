package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestThreadKeys: a thread kept under a tenant's key belongs to that
// tenant however it is made (created, by its first commit, copied,
// forked), and nothing moves it to another tenant's key.
func TestThreadKeys(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	doc, patch, _ := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"n": 1})
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "acme/a", Patch: patch, State: doc}); err != nil {
		t.Fatal(err)
	}
	if th, err := s.Thread(ctx, "acme/a"); err != nil || th.Tenant != "acme" {
		t.Fatalf("a thread made by its first commit: %+v, %v", th, err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		ok   bool
	}{
		{"create, tenant from the key", func() error { _, err := s.CreateThread(ctx, store.Thread{ID: "acme/b"}); return err }, true},
		{"create, the key's tenant", func() error {
			_, err := s.CreateThread(ctx, store.Thread{ID: "acme/c", Tenant: "acme"})
			return err
		}, true},
		{"create, another tenant", func() error {
			_, err := s.CreateThread(ctx, store.Thread{ID: "acme/d", Tenant: "globex"})
			return err
		}, false},
		{"copy into the tenant", func() error { _, err := s.CopyThread(ctx, "acme/a", "acme/e"); return err }, true},
		{"copy into another tenant", func() error { _, err := s.CopyThread(ctx, "acme/a", "globex/a"); return err }, false},
		{"copy out of the tenants", func() error { _, err := s.CopyThread(ctx, "acme/a", "f"); return err }, true},
		{"fork into another tenant", func() error {
			_, err := s.Fork(ctx, store.ForkRequest{Thread: "acme/a", At: 1, Into: "globex/g"})
			return err
		}, false},
		{"fork into the tenant", func() error {
			_, err := s.Fork(ctx, store.ForkRequest{Thread: "acme/a", At: 1, Into: "acme/g"})
			return err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, store.ErrInvalidArgument)) {
				t.Fatalf("%v (want ok: %v)", err, tc.ok)
			}
		})
	}
	if _, err := s.Thread(ctx, "globex/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused copy left a thread: %v", err)
	}
}
