// Package store persists threads and their checkpoints.
//
// A thread is a tree of checkpoints. Each checkpoint records one step: the
// RFC 6902 patch the step made to the state, its status and metadata, and
// its place in history (seq, parent). [Store] is what runners and front ends
// use; [Engine] implements it over a row-level [Backend], so every backend
// (store/memory, store/sqlite, and later Postgres) shares one storage format
// and one set of guarantees, checked by the conformance suite in
// store/storetest.
//
// # Guarantees
//
//   - A checkpoint is atomic: its patch, snapshot, status, metadata and place
//     in history are written in one transaction, or not at all.
//   - Committed means durable: when Append returns, the checkpoint survives a
//     process crash. On SQLite with durability "sync" (WAL,
//     synchronous=NORMAL) a power loss may lose the last commits; "strict"
//     (synchronous=FULL) survives power loss too.
//   - One writer per head: Append names the checkpoint it extends. If that is
//     no longer the head of its namespace, Append fails with ErrConflict and
//     writes nothing; history never forks silently.
//   - History is a tree: Fork adds a branch (or a new thread); nothing ever
//     rewrites a stored checkpoint. Prune deletes old checkpoints only.
//   - Bad data is an error, not a panic: every stored blob carries a CRC-32C;
//     a damaged row is reported as a *CorruptError naming thread, namespace
//     and seq, and other threads stay readable.
//
// # Storage format
//
// Each checkpoint row stores the patch of its step. A full snapshot of the
// state is stored only when the stored patch bytes since the last snapshot
// on the row's ancestry would exceed both SnapshotRatio times that
// snapshot's stored size (default 1) and MinSnapshotBytes (default 4 KiB).
// The first checkpoint of a namespace always has one. The bound: snapshot
// bytes never exceed SnapshotRatio⁻¹ × the patch bytes plus the last
// snapshot, so the total stays within about twice the bytes of all patches
// plus one state; and rebuilding any checkpoint reads one snapshot plus at
// most max(SnapshotRatio × that snapshot, MinSnapshotBytes) of patches. Blobs
// of 64 bytes or more are compressed with S2 when that makes them smaller;
// every blob carries a CRC-32C of its content.
//
// Decoded snapshots are kept in a bounded in-memory cache (Options.
// SnapshotCache, default 64 MiB), filled when a snapshot is written or read.
// Snapshots never change, so the cache never serves stale data.
//
// Namespaces keep the checkpoints of subgraphs apart in the same thread:
// each namespace of a thread has its own chain of seqs; "" is the root.
package store
