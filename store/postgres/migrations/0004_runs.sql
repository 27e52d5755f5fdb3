-- Format 4: the HTTP server's runs, the log of the events each run
-- streamed (so a client that reconnects gets what it missed), API keys,
-- and the leases (with fencing tokens) of the threads workers run.
CREATE TABLE IF NOT EXISTS cairn_runs (
	id         TEXT PRIMARY KEY,
	thread     TEXT NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	status     TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	data       BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS cairn_runs_thread ON cairn_runs (thread, created_at);
CREATE INDEX IF NOT EXISTS cairn_runs_status ON cairn_runs (status, created_at);
CREATE TABLE IF NOT EXISTS cairn_run_events (
	run  TEXT NOT NULL,
	seq  BIGINT NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS cairn_api_keys (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	hash       BYTEA NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_leases (
	thread     TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	token      BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
