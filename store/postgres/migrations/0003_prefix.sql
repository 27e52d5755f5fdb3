-- Format 3: every table is prefixed cairn_ (and so is its primary key),
-- so that a Cairn store can share a database or schema with other programs.
ALTER TABLE threads RENAME TO cairn_threads;
ALTER TABLE cairn_threads RENAME CONSTRAINT threads_pkey TO cairn_threads_pkey;
ALTER TABLE checkpoints RENAME TO cairn_checkpoints;
ALTER TABLE cairn_checkpoints RENAME CONSTRAINT checkpoints_pkey TO cairn_checkpoints_pkey;
ALTER TABLE snapshots RENAME TO cairn_snapshots;
ALTER TABLE cairn_snapshots RENAME CONSTRAINT snapshots_pkey TO cairn_snapshots_pkey;
ALTER TABLE writes RENAME TO cairn_writes;
ALTER TABLE cairn_writes RENAME CONSTRAINT writes_pkey TO cairn_writes_pkey;
