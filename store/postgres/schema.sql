-- The layout of a new Cairn store on PostgreSQL, at the latest migration:
-- what migrations 0001, 0002, … make of an empty schema, at once.
-- A thread's id is its key: tenant/id for a tenant's thread, its id for a
-- thread without a tenant (format 7, migrations/0007_tenant_keys.sql).
CREATE TABLE IF NOT EXISTS cairn_format (id int PRIMARY KEY, version int NOT NULL);
CREATE TABLE IF NOT EXISTS cairn_threads (
	id         text PRIMARY KEY,
	tenant     text NOT NULL DEFAULT '',
	metadata   jsonb,
	created_at bigint NOT NULL,
	crc        bigint NOT NULL DEFAULT 0,
	status     smallint NOT NULL DEFAULT 2,
	status_at  bigint NOT NULL DEFAULT 0,
	touched_at bigint NOT NULL DEFAULT 0
);
-- The thread index (see migrations/0006_thread_index.sql).
CREATE TABLE IF NOT EXISTS cairn_thread_meta (
	tenant     text NOT NULL,
	key        text NOT NULL,
	value      text NOT NULL,
	created_at bigint NOT NULL,
	thread     text NOT NULL,
	PRIMARY KEY (tenant, key, value, created_at, thread)
);
CREATE TABLE IF NOT EXISTS cairn_thread_counts (
	tenant text NOT NULL,
	key    text NOT NULL,
	value  text NOT NULL,
	shard  smallint NOT NULL,
	n      bigint NOT NULL,
	PRIMARY KEY (tenant, key, value, shard)
);
CREATE TABLE IF NOT EXISTS cairn_thread_totals (
	tenant text NOT NULL,
	status smallint NOT NULL,
	shard  smallint NOT NULL,
	n      bigint NOT NULL,
	PRIMARY KEY (tenant, status, shard)
);
CREATE INDEX IF NOT EXISTS cairn_threads_created ON cairn_threads (tenant, created_at, id);
CREATE INDEX IF NOT EXISTS cairn_threads_touched ON cairn_threads (tenant, touched_at, id);
CREATE INDEX IF NOT EXISTS cairn_threads_status ON cairn_threads (tenant, status, created_at, id) WHERE status_at > 0;
CREATE INDEX IF NOT EXISTS cairn_threads_status_at ON cairn_threads (tenant, status, status_at, id) WHERE status_at > 0;

CREATE TABLE IF NOT EXISTS cairn_checkpoints (
	thread       text NOT NULL,
	ns           text NOT NULL,
	seq          bigint NOT NULL,
	parent       bigint NOT NULL,
	base         bigint NOT NULL,
	since        bigint NOT NULL,
	base_size    bigint NOT NULL,
	status       smallint NOT NULL,
	created_at   bigint NOT NULL,
	has_snapshot boolean NOT NULL,
	meta         bytea,
	patch        bytea NOT NULL,
	crc          bigint NOT NULL DEFAULT 0,
	ext_id       text,
	PRIMARY KEY (thread, ns, seq)
);
-- Format 8: checkpoints by external id (migrations/0008_external_ids.sql).
CREATE INDEX IF NOT EXISTS cairn_checkpoints_ext_id ON cairn_checkpoints (thread, ns, ext_id, seq) WHERE ext_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS cairn_snapshots (
	thread text NOT NULL,
	ns     text NOT NULL,
	seq    bigint NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (thread, ns, seq)
);
CREATE TABLE IF NOT EXISTS cairn_writes (
	thread text NOT NULL,
	ns     text NOT NULL,
	seq    bigint NOT NULL,
	task   text NOT NULL,
	node   text NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (thread, ns, seq, task)
);
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
CREATE TABLE IF NOT EXISTS cairn_items (
	tenant     TEXT COLLATE "C" NOT NULL,
	ns         TEXT COLLATE "C" NOT NULL,
	key        TEXT COLLATE "C" NOT NULL,
	value      BYTEA NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	ttl        BIGINT NOT NULL DEFAULT 0,
	expires_at BIGINT NOT NULL DEFAULT 0,
	text_index TSVECTOR,
	vectors    BYTEA,
	PRIMARY KEY (tenant, ns, key)
);
CREATE INDEX IF NOT EXISTS cairn_items_text ON cairn_items USING GIN (text_index);
CREATE INDEX IF NOT EXISTS cairn_items_expiry ON cairn_items (expires_at) WHERE expires_at > 0;
