-- Format 4: the HTTP server's runs, and the log of the events each run
-- streamed (so a client that reconnects gets what it missed).
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
