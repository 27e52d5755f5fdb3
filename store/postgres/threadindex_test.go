package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/storetest"
)

// TestUpgradeFormat5 opens a store written before the thread index:
// read-only and without auto-migration it is refused; read-write it gains
// the index, filled from every thread's metadata and head, and every
// listing and count answers as a scan would. An encrypted store's
// finished and paused heads are classified with its keys.
func TestUpgradeFormat5(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts store.Options
	}{{"plain", store.Options{}}, {"encrypted", store.Options{Keyring: storetest.TestKeyring(t, 3)}}} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := schemaDSN(t)
			ctx := context.Background()
			s := open(t, dsn, tc.opts)
			storetest.SeedListing(t, s)
			s.Close()
			pgtest.ToFormat5(t, dsn)
			for _, o := range []postgres.Options{{ReadOnly: true}, {NoMigrate: true}} {
				if _, err := postgres.OpenStore(ctx, dsn, o, tc.opts); !errors.Is(err, store.ErrMigrationNeeded) {
					t.Fatalf("open %+v of a format 5 store: %v, want ErrMigrationNeeded", o, err)
				}
			}
			s = open(t, dsn, tc.opts)
			defer s.Close()
			ids, err := s.(*store.Engine).Backend().UnclassifiedThreads(ctx, "", 100)
			if err != nil || (len(ids) > 0) != (tc.opts.Keyring != nil) {
				t.Fatalf("unclassified after the upgrade: %v, %v", ids, err)
			}
			storetest.CheckListings(t, s, "upgraded", true)
		})
	}
}
