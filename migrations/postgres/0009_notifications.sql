-- The notification outbox; the same meaning as migrations/sqlite/0009_notifications.sql.
--
-- One row per event and sink, written in the same transaction as the ledger record it reports;
-- the leader sends them (at least once: `key`, `namespace/name/slot/event`, lets a receiver drop
-- duplicates) and marks each row delivered, or dropped with the reason.
CREATE TABLE notifications (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink            TEXT COLLATE "C" NOT NULL,
    key             TEXT COLLATE "C" NOT NULL,
    uid             TEXT COLLATE "C" NOT NULL,
    namespace       TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    event           TEXT COLLATE "C" NOT NULL,
    slot            TEXT COLLATE "C" NOT NULL,
    last_slot       TEXT COLLATE "C" NOT NULL,
    slot_count      BIGINT NOT NULL,
    reason          TEXT COLLATE "C",
    note            TEXT,
    created_at      TEXT COLLATE "C" NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at TEXT COLLATE "C" NOT NULL,
    last_error      TEXT,
    delivered_at    TEXT COLLATE "C",
    dropped_at      TEXT COLLATE "C",
    drop_reason     TEXT COLLATE "C",
    UNIQUE (sink, key)
);
CREATE INDEX notifications_pending ON notifications (next_attempt_at)
    WHERE delivered_at IS NULL AND dropped_at IS NULL;
CREATE INDEX notifications_pending_by_eru ON notifications (sink, uid, id)
    WHERE delivered_at IS NULL AND dropped_at IS NULL;
