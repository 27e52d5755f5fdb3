-- Format 1: threads, checkpoints (one patch per step), snapshots and
-- pending writes.
CREATE TABLE IF NOT EXISTS threads (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL DEFAULT '',
	metadata   BLOB,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
	thread       TEXT NOT NULL,
	ns           TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	parent       INTEGER NOT NULL,
	base         INTEGER NOT NULL,
	since        INTEGER NOT NULL,
	base_size    INTEGER NOT NULL,
	status       INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	has_snapshot INTEGER NOT NULL,
	meta         BLOB,
	patch        BLOB NOT NULL,
	PRIMARY KEY (thread, ns, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
	id     INTEGER PRIMARY KEY,
	thread TEXT NOT NULL,
	ns     TEXT NOT NULL,
	seq    INTEGER NOT NULL,
	data   BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS snapshots_key ON snapshots (thread, ns, seq);
CREATE TABLE IF NOT EXISTS writes (
	thread TEXT NOT NULL,
	ns     TEXT NOT NULL,
	seq    INTEGER NOT NULL,
	task   TEXT NOT NULL,
	node   TEXT NOT NULL,
	data   BLOB NOT NULL,
	PRIMARY KEY (thread, ns, seq, task)
) WITHOUT ROWID;
