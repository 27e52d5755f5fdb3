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
-- per key, the threads where it is not null (value '*'); thread_counts and thread_totals
-- count threads per entry and per status, kept in the transactions that
-- change them. The Go step after this fills them from the threads and
-- their heads.
ALTER TABLE threads ADD COLUMN status INTEGER NOT NULL DEFAULT 2;
ALTER TABLE threads ADD COLUMN status_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0;
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
CREATE INDEX IF NOT EXISTS threads_created ON threads (tenant, created_at, id);
CREATE INDEX IF NOT EXISTS threads_touched ON threads (tenant, touched_at, id);
CREATE INDEX IF NOT EXISTS threads_status ON threads (tenant, status, created_at, id) WHERE status_at > 0;
CREATE INDEX IF NOT EXISTS threads_status_at ON threads (tenant, status, status_at, id) WHERE status_at > 0;
