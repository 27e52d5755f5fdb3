-- Format 7: a tenant's thread is kept under its key, tenant/id
-- (store.ThreadKey), so that two tenants may each have a thread of the
-- same id. Every thread of a tenant still kept under its bare id takes
-- its key in every table that names it: cairn_threads, the metadata
-- index, checkpoints, snapshots, pending writes, runs and leases. Threads
-- without a tenant keep their ids. River's jobs name a run, not its
-- thread, and need nothing. The Go step before this refuses a thread
-- whose key another thread has; the one after it gives each renamed
-- thread and checkpoint row the checksum of its new name (a row damaged
-- before stays damaged) and moves the thread's counts to the shard of its
-- new name. Blobs stay as they were sealed: an encrypted store opens them
-- under their thread's bare id until cairn rekey seals them again.
CREATE TEMP TABLE cairn_tenant_keys (
	old text PRIMARY KEY,
	new text NOT NULL UNIQUE
) ON COMMIT DROP;
INSERT INTO cairn_tenant_keys (old, new)
	SELECT id, tenant || '/' || id FROM cairn_threads WHERE tenant <> '' AND strpos(id, '/') = 0;
UPDATE cairn_threads t SET id = k.new FROM cairn_tenant_keys k WHERE t.id = k.old;
UPDATE cairn_thread_meta t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
UPDATE cairn_checkpoints t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
UPDATE cairn_snapshots t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
UPDATE cairn_writes t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
UPDATE cairn_runs t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
UPDATE cairn_leases t SET thread = k.new FROM cairn_tenant_keys k WHERE t.thread = k.old;
