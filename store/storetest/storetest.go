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
		// once: the case reads no checkpoint state, so the snapshot
		// cache cannot change its answers; it runs in the cache variant.
		once bool
	}{
		{name: "AppendAndLoad", fn: testAppendAndLoad},
		{name: "StaleHeadConflicts", fn: testStaleHead},
		{name: "ConcurrentAppenders", fn: testConcurrentAppenders},
		{name: "ForkTree", fn: testForkTree},
		{name: "ForkInto", fn: testForkInto},
		{name: "ForkRefused", fn: testForkRefused},
		{name: "NamespaceList", fn: testNamespaceList},
		{name: "EditedRows", fn: testEditedRows},
		{name: "InvalidSnapshot", fn: testInvalidSnapshot},
		{name: "HistoryPagination", fn: testHistoryPagination},
		{name: "EveryCheckpointRebuilds", fn: testEveryCheckpointRebuilds},
		{name: "LateSnapshots", fn: testLateSnapshots},
		{name: "EmptyThread", fn: testEmptyThread},
		{name: "Threads", fn: testThreads},
		{name: "Listing", fn: testListing, once: true},
		{name: "Namespaces", fn: testNamespaces},
		{name: "PendingWrites", fn: testPendingWrites},
		{name: "AppendCarriesWrites", fn: testAppendCarriesWrites},
		{name: "Prune", fn: testPrune},
		{name: "PruneBranches", fn: testPruneBranches},
		{name: "PruneWhileWriting", fn: testPruneWhileWriting},
		{name: "PruneDeletesOldData", fn: testPruneDeletesOldData},
		{name: "Expiry", fn: testExpiry},
		{name: "CopyThread", fn: testCopyThread},
		{name: "Bundle", fn: testBundle},
		{name: "InvalidInput", fn: testInvalidInput},
		{name: "Reopen", fn: testReopen},
		{name: "Migrations", fn: testMigrations},
		{name: "Corruption", fn: testCorruption},
		{name: "Closed", fn: testClosed},
		{name: "RunLog", fn: testRunLog},
		{name: "RunLogRefs", fn: testRunLogRefs},
		{name: "SetMetadata", fn: testSetMetadata},
		{name: "Keys", fn: testKeys},
		{name: "Leases", fn: testLeases},
		{name: "Items", fn: testItems, once: true},
		{name: "Storage", fn: testStorage},
		{name: "ExternalIDs", fn: testExternalIDs},
		{name: "Inbox", fn: testInbox, once: true},
	}
	// Every case runs with the snapshot cache and without it: the cache
	// must never change an answer (except to hide damage from a process
	// that read the data before it was damaged). Cases that read no
	// checkpoint state (listings of thread indexes, items) run once.
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
				if tc.once && v.opts.SnapshotCache < 0 {
					continue
				}
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
