package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// TestSentinelsAreTheDrivers: store's sentinel errors are the driver
// package's very values, so an error a backend wraps matches store's
// names with errors.Is, and a *driver.CorruptError is a
// *store.CorruptError.
func TestSentinelsAreTheDrivers(t *testing.T) {
	for _, pair := range [][2]error{
		{store.ErrNotFound, driver.ErrNotFound}, {store.ErrConflict, driver.ErrConflict},
		{store.ErrInvalidID, driver.ErrInvalidID}, {store.ErrInvalidArgument, driver.ErrInvalidArgument},
		{store.ErrCorrupt, driver.ErrCorrupt}, {store.ErrClosed, driver.ErrClosed},
		{store.ErrUnsupportedFormat, driver.ErrUnsupportedFormat}, {store.ErrNotStore, driver.ErrNotStore},
		{store.ErrReadOnly, driver.ErrReadOnly}, {store.ErrMigrationNeeded, driver.ErrMigrationNeeded},
		{store.ErrRecoveryNeeded, driver.ErrRecoveryNeeded}, {store.ErrUnavailable, driver.ErrUnavailable},
		{store.ErrFenced, driver.ErrFenced}, {store.ErrLeaseHeld, driver.ErrLeaseHeld},
	} {
		if pair[0] != pair[1] {
			t.Errorf("store's %v is not the driver's", pair[0])
		}
		if err := fmt.Errorf("backend: %w", pair[1]); !errors.Is(err, pair[0]) {
			t.Errorf("errors.Is(%v, store's) = false", err)
		}
	}
	var err error = &driver.CorruptError{Thread: "t", Seq: 2, What: "row", Err: errors.New("bad")}
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Seq != 2 || !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a driver's CorruptError is not store's: %v", err)
	}
	if err := driver.FencedError("t", 1, 2); !errors.Is(err, store.ErrFenced) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("FencedError: %v", err)
	}
}
