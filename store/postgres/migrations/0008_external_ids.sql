-- Format 8: a checkpoint row keeps the id its writer gave it
-- (store.Checkpoint.ExternalID: the LangGraph saver's checkpoint id),
-- indexed with the row's key, so that a checkpoint is found by it in one
-- index lookup (store.ExternalIDs) instead of a walk of its namespace.
-- Rows the LangGraph saver wrote before carry the id in their metadata
-- (extra.langgraph.checkpoint.id): it is copied, row by row, a row whose
-- metadata is not JSON (damaged) left without one. The metadata of an
-- encrypted store is sealed: its rows get no id here (see
-- docs/langgraph-saver.md).
ALTER TABLE cairn_checkpoints ADD COLUMN IF NOT EXISTS ext_id text;
DO $$
DECLARE r record;
BEGIN
	FOR r IN SELECT thread, ns, seq, meta FROM cairn_checkpoints
		WHERE meta IS NOT NULL AND get_byte(meta, 0) = 123 AND position('"langgraph"'::bytea IN meta) > 0 LOOP
		BEGIN
			UPDATE cairn_checkpoints SET ext_id = convert_from(r.meta, 'UTF8')::jsonb #>> '{extra,langgraph,checkpoint,id}'
				WHERE thread = r.thread AND ns = r.ns AND seq = r.seq;
		EXCEPTION WHEN others THEN NULL;
		END;
	END LOOP;
END $$;
CREATE INDEX IF NOT EXISTS cairn_checkpoints_ext_id ON cairn_checkpoints (thread, ns, ext_id, seq) WHERE ext_id IS NOT NULL;
