-- Format 7: a tenant's thread is kept under its key, tenant/id
-- (store.ThreadKey), so that two tenants may each have a thread of the
-- same id. Every thread of a tenant still kept under its bare id takes
-- its key in every table that names it: threads, the metadata index,
-- lanes, snapshots, pending writes, runs and leases (checkpoint rows name
-- their thread through their lane). Threads without a tenant keep their
-- ids. The Go step before this refuses a thread whose key another thread
-- has; the one after it gives each renamed thread and checkpoint row the
-- checksum of its new name (a row damaged before stays damaged) and drops
-- the list of renamed threads. Blobs stay as they were sealed: an
-- encrypted store opens them under their thread's bare id until cairn
-- rekey seals them again.
DROP TABLE IF EXISTS temp.tenant_keys;
CREATE TEMP TABLE tenant_keys (
	old TEXT PRIMARY KEY,
	new TEXT NOT NULL UNIQUE
) WITHOUT ROWID;
INSERT INTO temp.tenant_keys (old, new)
	SELECT id, tenant || '/' || id FROM threads WHERE tenant <> '' AND instr(id, '/') = 0;
UPDATE threads SET id = (SELECT new FROM temp.tenant_keys WHERE old = threads.id)
	WHERE id IN (SELECT old FROM temp.tenant_keys);
UPDATE thread_meta SET thread = (SELECT new FROM temp.tenant_keys WHERE old = thread_meta.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
UPDATE lanes SET thread = (SELECT new FROM temp.tenant_keys WHERE old = lanes.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
UPDATE snapshots SET thread = (SELECT new FROM temp.tenant_keys WHERE old = snapshots.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
UPDATE writes SET thread = (SELECT new FROM temp.tenant_keys WHERE old = writes.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
UPDATE runs SET thread = (SELECT new FROM temp.tenant_keys WHERE old = runs.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
UPDATE leases SET thread = (SELECT new FROM temp.tenant_keys WHERE old = leases.thread)
	WHERE thread IN (SELECT old FROM temp.tenant_keys);
