package storetest

import (
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Harness opens stores of one backend.
type Harness struct {
	// Open returns a new, empty store with the given engine options. The
	// suite closes it.
	Open func(t *testing.T, opts store.Options) store.Store
	// Reopen closes s and opens the same storage again; nil for backends
	// without persistence.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Corrupt damages the stored column ("patch", "snapshot", "meta") of a
	// checkpoint; nil skips the corruption tests.
	Corrupt func(t *testing.T, s store.Store, ref store.Ref, column string)
	// Edit sets one stored column to value (an Inc adds to it), as someone
	// editing the database by hand would: a checkpoint column (see
	// CheckpointColumns) of the row ref names, "snapshot" for its snapshot
	// data, or a thread column (ThreadColumns) of thread ref.Thread. nil
	// skips the tests of edited rows.
	Edit func(t *testing.T, s store.Store, ref store.Ref, column string, value any)
	// Bytes returns every byte the storage of s holds — a database file
	// and its journals, every row of every table of a schema — for the
	// tests that check deleted data is gone; nil skips those checks.
	Bytes func(t *testing.T, s store.Store) []byte
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendAndLoad", testAppendAndLoad},
		{"StaleHeadConflicts", testStaleHead},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"ForkTree", testForkTree},
		{"ForkInto", testForkInto},
		{"ForkRefused", testForkRefused},
		{"NamespaceList", testNamespaceList},
		{"EditedRows", testEditedRows},
		{"InvalidSnapshot", testInvalidSnapshot},
		{"HistoryPagination", testHistoryPagination},
		{"EveryCheckpointRebuilds", testEveryCheckpointRebuilds},
		{"LateSnapshots", testLateSnapshots},
		{"EmptyThread", testEmptyThread},
		{"Threads", testThreads},
		{"Listing", testListing},
		{"Namespaces", testNamespaces},
		{"PendingWrites", testPendingWrites},
		{"Prune", testPrune},
		{"PruneBranches", testPruneBranches},
		{"PruneWhileWriting", testPruneWhileWriting},
		{"PruneDeletesOldData", testPruneDeletesOldData},
		{"Expiry", testExpiry},
		{"CopyThread", testCopyThread},
		{"InvalidInput", testInvalidInput},
		{"Reopen", testReopen},
		{"Migrations", testMigrations},
		{"Corruption", testCorruption},
		{"Closed", testClosed},
		{"RunLog", testRunLog},
		{"RunLogRefs", testRunLogRefs},
		{"SetMetadata", testSetMetadata},
		{"Keys", testKeys},
		{"Leases", testLeases},
		{"Items", testItems},
		{"Storage", testStorage},
		{"ExternalIDs", testExternalIDs},
	}
	// Every case runs with the snapshot cache and without it: the cache
	// must never change an answer (except to hide damage from a process
	// that read the data before it was damaged).
	for _, v := range []struct {
		name string
		opts store.Options
	}{{"cache", store.Options{}}, {"nocache", store.Options{SnapshotCache: -1}}} {
		t.Run(v.name, func(t *testing.T) {
			vh := h
			vh.Open = func(t *testing.T, o store.Options) store.Store {
				if o.SnapshotCache == 0 {
					o.SnapshotCache = v.opts.SnapshotCache
				}
				return h.Open(t, o)
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, vh) })
			}
		})
	}
}

func open(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t, store.Options{})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var schema = state.MustSchema(
	state.WithField("messages", state.ReducerMessages),
	state.WithField("count", state.ReducerReplace),
	state.WithField("kv", state.ReducerMerge),
	state.WithField("total", state.ReducerAdd),
)
