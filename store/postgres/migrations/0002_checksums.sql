-- Format 2: a CRC-32C over every column of thread and checkpoint rows.
-- The Go step that follows computes the checksum of every existing row.
ALTER TABLE threads ADD COLUMN IF NOT EXISTS crc bigint NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS crc bigint NOT NULL DEFAULT 0;
