-- Format 8: a checkpoint row keeps the id its writer gave it
-- (store.Checkpoint.ExternalID: the LangGraph saver's checkpoint id),
-- indexed with the row's key, so that a checkpoint is found by it in one
-- index lookup (store.ExternalIDs) instead of a walk of its namespace.
-- Rows the LangGraph saver wrote before carry the id in their metadata
-- (extra.langgraph.checkpoint.id): it is copied. The metadata of an
-- encrypted store is sealed: its rows get no id here (see
-- docs/langgraph-saver.md).
ALTER TABLE checkpoints ADD COLUMN ext_id TEXT;
UPDATE checkpoints SET ext_id = json_extract(CAST(meta AS TEXT), '$.extra.langgraph.checkpoint.id')
	WHERE meta IS NOT NULL AND json_valid(CAST(meta AS TEXT))
	AND json_type(CAST(meta AS TEXT), '$.extra.langgraph.checkpoint.id') = 'text';
CREATE INDEX IF NOT EXISTS checkpoints_ext_id ON checkpoints (ext_id, id) WHERE ext_id IS NOT NULL;
