-- The notification outbox: one row per event and sink, written in the same transaction as the
-- ledger record it reports (a slot record, a restart's end), so a crash cannot lose one; the
-- leader sends them (at least once: `key` lets a receiver drop duplicates) and marks each row
-- delivered, or dropped with the reason (`expired` past --notification-max-age, `outbox_full`
-- past --notification-outbox-max, `unknown_sink` when the sink left the configuration).
-- `key` is `namespace/name/slot/event`. Pending rows are found by `next_attempt_at`, and one
-- Eru's for one sink (a message carries them all), hence the partial indexes; settled rows are
-- deleted once older than the maximum age.
CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    sink            TEXT NOT NULL,
    key             TEXT NOT NULL,
    uid             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    name            TEXT NOT NULL,
    event           TEXT NOT NULL,
    slot            TEXT NOT NULL,
    last_slot       TEXT NOT NULL,
    slot_count      INTEGER NOT NULL,
    reason          TEXT,
    note            TEXT,
    created_at      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error      TEXT,
    delivered_at    TEXT,
    dropped_at      TEXT,
    drop_reason     TEXT,
    UNIQUE (sink, key)
);
CREATE INDEX notifications_pending ON notifications (next_attempt_at)
    WHERE delivered_at IS NULL AND dropped_at IS NULL;
CREATE INDEX notifications_pending_by_eru ON notifications (sink, uid, id)
    WHERE delivered_at IS NULL AND dropped_at IS NULL;
