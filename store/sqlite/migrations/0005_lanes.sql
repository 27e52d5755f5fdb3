-- Format 5: checkpoint rows keyed by one integer. Each thread namespace
-- is a lane with a number of its own; a row's key is lane << 32 | seq, its
-- table a rowid table. A thread's rows are then appended at the end of the
-- table's b-tree, where SQLite adds a page without moving the rows before
-- it: about one WAL frame a commit, against nearly two for the (thread, ns,
-- seq) key of formats 1 to 4, whose b-tree shifts rows between its last
-- pages as it grows. The Go step before this checks that every seq fits
-- in 32 bits.
CREATE TABLE IF NOT EXISTS lanes (
	id     INTEGER PRIMARY KEY CHECK (id > 0 AND id < 2147483648),
	thread TEXT NOT NULL,
	ns     TEXT NOT NULL,
	UNIQUE (thread, ns)
);
INSERT OR IGNORE INTO lanes (thread, ns) SELECT DISTINCT thread, ns FROM checkpoints ORDER BY thread, ns;
CREATE TABLE checkpoints_lanes (
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
INSERT INTO checkpoints_lanes (id, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc)
	SELECT (l.id << 32) + c.seq, c.parent, c.base, c.since, c.base_size, c.status, c.created_at, c.has_snapshot, c.meta, c.patch, c.crc
	FROM checkpoints c JOIN lanes l ON l.thread = c.thread AND l.ns = c.ns
	ORDER BY 1;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_lanes RENAME TO checkpoints;
