-- The layout of a new Cairn store on SQLite, at the latest migration:
-- what migrations 0001, 0002, … make of an empty file, at once.
-- A thread's id is its key: tenant/id for a tenant's thread, its id for a
-- thread without a tenant (format 7, migrations/0007_tenant_keys.sql).
-- Format 8's external ids (migrations/0008_external_ids.sql) are applied
-- after this file, as a migration: a file a crash of an older Cairn left
-- holds a checkpoints table their index cannot take yet.
CREATE TABLE IF NOT EXISTS threads (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL DEFAULT '',
	metadata   BLOB,
	created_at INTEGER NOT NULL,
	crc        INTEGER NOT NULL DEFAULT 0,
	status     INTEGER NOT NULL DEFAULT 2,
	status_at  INTEGER NOT NULL DEFAULT 0,
	touched_at INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- The thread index (see migrations/0006_thread_index.sql).
CREATE INDEX IF NOT EXISTS threads_created ON threads (tenant, created_at, id);
CREATE INDEX IF NOT EXISTS threads_touched ON threads (tenant, touched_at, id);
CREATE INDEX IF NOT EXISTS threads_status ON threads (tenant, status, created_at, id) WHERE status_at > 0;
CREATE INDEX IF NOT EXISTS threads_status_at ON threads (tenant, status, status_at, id) WHERE status_at > 0;
CREATE TABLE IF NOT EXISTS thread_meta (
	tenant     TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	thread     TEXT NOT NULL,
	PRIMARY KEY (tenant, key, value, created_at, thread)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS thread_counts (
	tenant TEXT NOT NULL,
	key    TEXT NOT NULL,
	value  TEXT NOT NULL,
	n      INTEGER NOT NULL,
	PRIMARY KEY (tenant, key, value)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS thread_totals (
	tenant TEXT NOT NULL,
	status INTEGER NOT NULL,
	n      INTEGER NOT NULL,
	PRIMARY KEY (tenant, status)
) WITHOUT ROWID;

-- A thread namespace's rows form a lane; a row's key is lane << 32 | seq
-- (see migrations/0005_lanes.sql).
CREATE TABLE IF NOT EXISTS lanes (
	id     INTEGER PRIMARY KEY CHECK (id > 0 AND id < 2147483648),
	thread TEXT NOT NULL,
	ns     TEXT NOT NULL,
	UNIQUE (thread, ns)
);
CREATE TABLE IF NOT EXISTS checkpoints (
	id           INTEGER PRIMARY KEY CHECK (id > 4294967295),
	parent       INTEGER NOT NULL,
	base         INTEGER NOT NULL,
	since        INTEGER NOT NULL,
	base_size    INTEGER NOT NULL,
	status       INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	has_snapshot INTEGER NOT NULL,
	meta         BLOB,
	patch        BLOB NOT NULL,
	crc          INTEGER NOT NULL DEFAULT 0
);
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
CREATE TABLE IF NOT EXISTS runs (
	id         TEXT PRIMARY KEY,
	thread     TEXT NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	status     TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	data       BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread, created_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status, created_at);
CREATE TABLE IF NOT EXISTS run_events (
	run  TEXT NOT NULL,
	seq  INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (run, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	hash       BLOB NOT NULL,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
	thread     TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	token      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
	id         INTEGER PRIMARY KEY,
	tenant     TEXT NOT NULL,
	ns         TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	ttl        INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL DEFAULT 0,
	vectors    BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS items_key ON items (tenant, ns, key);
CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at) WHERE expires_at > 0;
CREATE VIRTUAL TABLE IF NOT EXISTS item_text USING fts5(text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 0');
