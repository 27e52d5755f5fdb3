-- Format 5: the long-term memory store (store.ItemStore): items of a
-- tenant under a namespace (its labels joined by ".") and a key, with
-- their times to live, the vectors of their indexed texts and the words
-- full-text search matches (a tsvector of the 'simple' configuration,
-- GIN-indexed). Names compare byte by byte (COLLATE "C"), so the items
-- below a namespace are a range of the primary key.
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
