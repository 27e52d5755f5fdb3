// Package driver is the store's service-provider interface: what a backend
// (store/inmem, store/sqlite, store/postgres) implements and package
// store's engine consumes, as database/sql/driver is to database/sql.
// Programs use package store; they import a backend for its driver
// (store.Open by URL) or its constructor, never this package, unless they
// write a backend.
//
// A backend implements Backend (with ThreadIndex), and may implement the
// optional parts the engine looks for: SnapshotAttacher (late snapshots),
// ItemBackend and ItemRewriter (long-term memory), BlobRewriter and
// Vacuumer (rekey, vacuum), StorageBackend (ThreadStorageOf),
// ThreadLoader (a bundle's thread written in one transaction:
// store.ImportBundle), and store's RunLog, KeyStore and LeaseStore. A Driver, registered under a URL scheme
// (Register) from the backend's init function, opens it by URL; a
// MigratingDriver also lists its Migrations.
//
// What an implementer must guarantee (store/storetest checks it; run
// storetest.Run against the backend):
//
//   - Blobs are opaque: a backend stores Row.Meta, Patch and Snapshot,
//     Write.Update, item values and run data as given and returns them
//     byte for byte; the engine encodes, seals and checks them.
//   - Insert is atomic (the row, its snapshot, Row.Create, Row.Head
//     together) and fails with ErrConflict, writing nothing, on a taken
//     seq, a missing parent, an existing thread with Row.NewThread, or a
//     Row.Base BaseFits refuses; with Row.Fence, it fails with an error
//     FencedError builds unless the lease still has that token.
//   - Row.Sum and ThreadRecord.Sum (RowChecksum, ThreadChecksum) are stored
//     and returned as given: the engine verifies them on read.
//   - DeleteRanges deletes and rebases in one transaction, and fails with
//     ErrConflict, changing nothing, when the namespace's head moved or a
//     rebased row's checksum is no longer Rebase.Old.
//   - The thread index (ThreadIndex: statuses, touch times, metadata
//     entries by IndexEntries, counters) is kept in the transactions that
//     change it.
//   - Errors are classified with this package's sentinels (ErrNotFound,
//     ErrConflict, ErrCorrupt or a *CorruptError, ErrUnavailable,
//     ErrReadOnly, ErrClosed, …), wrapped with %w. Package store's
//     sentinels are these very values, so errors.Is(err, store.ErrConflict)
//     holds for an error a backend returns.
//   - A Backend is safe for concurrent use.
package driver
