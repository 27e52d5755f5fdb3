-- Format 3: the HTTP server's runs, the log of the events each run
-- streamed (so a client that reconnects gets what it missed), API keys,
-- and the leases (with fencing tokens) of the threads workers run.
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
