// Package store persists threads and their checkpoints.
//
// A thread is a tree of checkpoints. Each checkpoint records one step: the
// RFC 6902 patch the step made to the state, its status and metadata, and
// its place in history (seq, parent). [Store] is what runners and front ends
// use; [Engine] implements it over a row-level backend, so every backend
// (store/inmem, store/sqlite, store/postgres) shares one storage format
// and one set of guarantees, checked by the conformance suite in
// store/storetest.
//
// This package is the user's API: the store, its requests and records,
// the item, key, lease and run stores, encryption, pruning, migrations
// and the errors. What a backend implements and the engine consumes — the
// row-level Backend and its optional parts, the rows and queries they
// pass, the row checksums and the URL drivers' registry — is the driver
// SPI, package store/driver, as database/sql/driver is database/sql's.
// The few types both sides name (Status, ThreadStatus, ThreadSort, Write,
// StoredRows, Migration, CorruptError) are aliases of the driver's, and
// the sentinel errors are the driver's very values, so errors.Is matches
// an error a backend returns with store's names.
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
//     rewrites what a stored checkpoint holds (its state, patch, metadata).
//     Prune deletes old checkpoints, and gives the oldest it keeps of a
//     branch a snapshot of its own state, in the same transaction.
//   - A fork into a new thread is atomic: the thread record and its first
//     checkpoint are written in one transaction, so a crash leaves either
//     no thread or the whole fork, never an empty thread that blocks the
//     retry. The new thread inherits the source thread's tenant and
//     metadata (ForkRequest.Metadata replaces the metadata), and a fork
//     checkpoint carries the schedule (Meta.Next, Meta.Tasks) of the
//     checkpoint it copies unless the request gives one, so resuming it
//     runs what that checkpoint would have run. FAILED and INTERRUPTED
//     checkpoints cannot be forked: the error names the seq whose state
//     the unfinished step read (Meta.StepOf), the one to fork from.
//   - Bad data is an error, not a panic. Every stored blob carries a
//     CRC-32C of its content, and every row a checksum of all its columns:
//     a checkpoint row's thread, namespace, seq, parent, snapshot
//     bookkeeping (base, since, base size, snapshot flag), status, time,
//     metadata and patch; a thread row's id, tenant, metadata (as a JSON
//     value) and creation time. A damaged or hand-edited row is reported as
//     a *CorruptError naming thread, namespace and seq (or the thread), and
//     other threads stay readable. Snapshots are bound to their row by
//     their key and size (the row's base size). The checksums find damage
//     and edits made outside Cairn; they are not a MAC and do not stop
//     someone who recomputes them. A damaged database file (truncated,
//     overwritten, a table dropped) is ErrCorrupt naming the file or table;
//     another program's database is ErrNotStore and is never changed.
//   - Read-only opening (sqlite.Options.ReadOnly, postgres.Options.ReadOnly,
//     store.Open with OpenOptions.ReadOnly) creates no directory, file or table and writes
//     nothing: a missing SQLite file is ErrNotFound, a database without
//     Cairn's tables ErrNotStore, and writes fail with ErrReadOnly. SQLite
//     may create its WAL-index (-shm) and an empty -wal beside a WAL-mode
//     store to coordinate with writers; the database file is untouched.
//
// # Opening by URL
//
// Open opens a store from a URL through the Driver its scheme registered;
// each backend registers its scheme when imported, as database/sql
// drivers do, so a program links only the backends it imports:
//
//	import _ "github.com/cairn-dev/cairn/store/sqlite"   // sqlite:PATH[?durability=strict]
//	import _ "github.com/cairn-dev/cairn/store/postgres" // postgres://user@host/db[?search_path=schema]
//	import _ "github.com/cairn-dev/cairn/store/inmem"   // inmem:
//
//	s, err := store.Open(ctx, "sqlite:.cairn/state.db", store.OpenOptions{})
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
// Format versions: 1 had blob CRCs only; 2 adds the row checksums (a crc
// column on threads and checkpoints). Opening a version 1 store read-write
// upgrades it in one transaction, computing the checksum of every existing
// row (so edits made before the upgrade are not detected); opening it
// read-only reads it as before, without row checksums. A store of a newer
// version than this code knows is refused with ErrUnsupportedFormat.
//
// Format 3 adds the HTTP server's runs, run event logs, API keys and
// leases; 4 the long-term memory items and their full-text index; 5 keys
// checkpoint rows by lane and seq (a lane per thread namespace, so a
// thread's rows append at the end of the table); 6 the thread index (see
// Listing threads), filled from every thread's metadata and head in the
// migration's transaction; 7 keeps a tenant's thread under its key,
// tenant/id (ThreadKey), so two tenants may hold threads of one id. Each
// version is a migration (Layout, MigrationsOf; cairn migrate status|up|sql),
// applied in order in one transaction when a store is opened read-write.
//
// Several processes may open a new SQLite store at once: its tables are
// created in one IMMEDIATE transaction, and each process waits for the
// others (sqlite.Options.BusyTimeout) instead of failing with SQLITE_BUSY.
//
// Encryption at rest: with Options.Keyring, every blob (patches with the
// checkpoint's metadata, snapshots, pending writes, run records and events,
// item values) is sealed with AES-256-GCM, bound to its tenant, thread and
// position; ids, times, statuses and thread metadata stay plaintext.
// Engine.Rekey re-seals a store with the newest key. See
// docs/encryption.md.
//
// Decoded snapshots are kept in a bounded in-memory cache (Options.
// SnapshotCache, default 16 MiB), filled when a snapshot is written or read.
// Snapshots never change, so the cache never serves stale data.
//
// Namespaces keep the checkpoints of subgraphs, gates and handoffs apart in
// the same thread: each namespace of a thread has its own chain of seqs;
// "" is the root. Store.Namespaces lists them with their heads.
//
// # Listing threads
//
// ListThreads and CountThreads select, order and page threads through
// indexes every backend keeps in the transactions that change them
// (driver.ThreadIndex): each thread's tenant, creation time, status as its
// root head gives it (ThreadStatusOf), the time of that status, a touch
// time within TouchSlack of its head's time, its metadata entries
// (driver.IndexEntries), and counters of threads per status and per entry.
// A commit that leaves its thread idle writes none of it. The engine plans
// each listing from the counters (driver.ListQuery.Drive): no listing reads
// every thread, and none reads a head's state; counts with no filter, a
// status filter or one metadata filter read a few counter rows.
//
// # Where a thread's bytes go
//
// ThreadStorageOf reports what the store keeps for a thread and the bytes
// of its stored data (as written: compressed, sealed): its checkpoint rows
// (patches, metadata, snapshots) by namespace and shared out by top-level
// state field, its pending writes, and the runs and run event logs an HTTP
// server keeps for it. The engine walks the checkpoint rows a page at a
// time and reads each snapshot on its own, decoding only the length
// prefixes of their encodings; a driver.StorageBackend counts the rest.
//
// # Long-term memory
//
// ItemsOf gives a store's ItemStore, LangGraph's BaseStore: JSON objects
// under keys in hierarchical namespaces of items (["users", "u1"]),
// across threads, per tenant, with filters (CompileFilter), full-text or
// semantic search (WithIndex, an Embedder) and times to live. Backends
// implement driver.ItemBackend; the item store on top checks every operation,
// stamps times with the engine's clock and computes what is indexed, so
// every backend answers alike (the conformance suite's Items tests).
package store
