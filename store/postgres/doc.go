// Package postgres is Cairn's store backend for PostgreSQL, through pgx and
// its pool: the store a team moves to when one machine is not enough. It
// keeps the same rows as store/sqlite and passes the same conformance suite.
//
// An append is one transaction sent as one batch: the thread record on the
// first checkpoint, the checkpoint row (inserted only when its parent
// exists) and its snapshot. The primary key on (thread, namespace, seq)
// turns a stale writer into store.ErrConflict, whichever process it runs
// in. Commits are durable when PostgreSQL says they are (synchronous_commit).
//
// The tables live in the connection's search_path; give each deployment or
// test its own schema with a search_path parameter in the URL. A schema
// holding tables named like Cairn's without Cairn's cairn_format table is
// another program's: it is refused with store.ErrNotStore and not changed.
// Options.ReadOnly opens an existing store without creating anything.
package postgres
