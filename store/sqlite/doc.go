// Package sqlite is Cairn's default store backend: one SQLite file in WAL
// mode, through the pure-Go modernc.org/sqlite driver (no cgo).
//
// One connection writes; a goroutine owns it and groups the commits that
// arrive together (from different threads) into one transaction, so many
// concurrent runs share each fsync. Reads use a separate pool and never wait
// for the writer.
//
// Durability: with DurabilitySync (the default; WAL, synchronous=NORMAL) a
// commit that returned survives a crash of the process; a power loss or OS
// crash may lose the most recent commits, never corrupt older ones. With
// DurabilityStrict (synchronous=FULL) every commit is fsynced before it
// returns and survives power loss too.
//
// Several processes may open one file; SQLite's locks serialise their
// writers, and the store's head check (a primary key on thread, namespace
// and seq) makes a stale writer fail with store.ErrConflict. Processes that
// open a new file at once wait for each other while one creates the tables.
//
// Opening looks before it changes anything: a file holding another
// program's tables is refused with store.ErrNotStore and left as it was; a
// Cairn file missing one of its tables, truncated or overwritten is
// store.ErrCorrupt naming the file (and the table). Options.ReadOnly opens
// an existing store without creating or writing anything.
package sqlite
