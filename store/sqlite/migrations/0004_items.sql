-- Format 4: the long-term memory store (store.ItemStore): items of a
-- tenant under a namespace (its labels joined by ".") and a key, with
-- their times to live and the vectors of their indexed texts; item_text
-- is the full-text index of their words (FTS5, contentless: it keeps the
-- index, not the text), its rowid the item's id.
CREATE TABLE IF NOT EXISTS items (
	id         INTEGER PRIMARY KEY,
	tenant     TEXT NOT NULL,
	ns         TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	ttl        INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL DEFAULT 0,
	vectors    BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS items_key ON items (tenant, ns, key);
CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at) WHERE expires_at > 0;
CREATE VIRTUAL TABLE IF NOT EXISTS item_text USING fts5(text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 0');
