-- Format 6: the thread index, so that no listing reads every thread. Each
-- thread keeps its status as its root head gives it (1 error, 2 idle, 3
-- interrupted; 0 when an encrypted store's head must be read with its keys
-- first), the time of that status (its head's time, for a status other
-- than idle; 0 for idle) and a touch time within 100 ms of its head's time
-- (written with a root checkpoint only when the status changes or the
-- last touch is 100 ms old). Indexes lead with the tenant; the status
-- indexes hold only the threads that are not idle (status_at > 0). The
-- metadata index holds, per thread, an entry (key, canonical JSON) for
-- each top-level scalar other than null; the counters count these and,
-- per key, the threads where it is not null (value '*'). cairn_thread_counts and
-- cairn_thread_totals count threads per entry and per status in 16 shards
-- each (a thread's shard comes from its id), so that concurrent
-- transactions rarely update the same counter row; a count sums the
-- shards. The Go step after this fills them from the threads and their
-- heads.
ALTER TABLE cairn_threads ADD COLUMN IF NOT EXISTS status smallint NOT NULL DEFAULT 2;
ALTER TABLE cairn_threads ADD COLUMN IF NOT EXISTS status_at bigint NOT NULL DEFAULT 0;
ALTER TABLE cairn_threads ADD COLUMN IF NOT EXISTS touched_at bigint NOT NULL DEFAULT 0;
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
