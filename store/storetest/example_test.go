package storetest_test

import (
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/storetest"
)

// A backend proves itself against the conformance suite from its own
// tests: Open gives the suite a new, empty store; the optional hooks
// (Reopen, Corrupt, Edit) turn on the persistence and damage cases.
func Example() {
	// In a file of the backend's package ending in _test.go:
	_ = func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			Open: func(t *testing.T, o store.Options) store.Store { return inmem.Open(o) },
		})
	}
}
