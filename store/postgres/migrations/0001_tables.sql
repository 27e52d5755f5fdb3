-- Format 1: the format table, threads, checkpoints (one patch per step),
-- snapshots and pending writes.
CREATE TABLE IF NOT EXISTS cairn_format (id int PRIMARY KEY, version int NOT NULL);
CREATE TABLE IF NOT EXISTS threads (
	id         text PRIMARY KEY,
	tenant     text NOT NULL DEFAULT '',
	metadata   jsonb,
	created_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
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
	PRIMARY KEY (thread, ns, seq)
);
CREATE TABLE IF NOT EXISTS snapshots (
	thread text NOT NULL,
	ns     text NOT NULL,
	seq    bigint NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (thread, ns, seq)
);
CREATE TABLE IF NOT EXISTS writes (
	thread text NOT NULL,
	ns     text NOT NULL,
	seq    bigint NOT NULL,
	task   text NOT NULL,
	node   text NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (thread, ns, seq, task)
);
