-- A restart another field manager undid; the same meaning as migrations/sqlite/0011_reverts_and_silences.sql.
ALTER TABLE restarts ADD COLUMN reverted_by TEXT COLLATE "C";
ALTER TABLE restarts ADD COLUMN reverted_at TEXT COLLATE "C";

-- The Alertmanager silence a restart held while it rolled out.
ALTER TABLE restarts ADD COLUMN silence_id TEXT COLLATE "C";
ALTER TABLE restarts ADD COLUMN silence_until TEXT COLLATE "C";
ALTER TABLE restarts ADD COLUMN silence_expired_at TEXT COLLATE "C";
