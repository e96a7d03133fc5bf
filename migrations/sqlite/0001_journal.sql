-- The journal: the source of truth for history. Timestamps are RFC 3339 UTC strings with
-- millisecond precision and a trailing Z (fixed width), so text order is time order.
-- Unique keys make every append idempotent: replaying a reconcile after a crash writes nothing twice.

-- One row per operator process; the heartbeat bounds how long it was up, so the gap between one
-- run's last heartbeat and the next run's start is a downtime window that explains missed slots.
CREATE TABLE operator_runs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    stopped_at   TEXT,
    version      TEXT NOT NULL,
    instance     TEXT NOT NULL
);

-- Every state-machine transition, with the event that caused it. `observed` is the resourceVersion
-- of the object the reconcile saw: the same observation replayed yields the same key.
CREATE TABLE transitions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    uid        TEXT NOT NULL,
    observed   TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    event      TEXT NOT NULL,
    at         TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '{}',
    UNIQUE (uid, observed, from_state, to_state, event)
);
CREATE INDEX transitions_by_time ON transitions (at DESC, id DESC);
CREATE INDEX transitions_by_object ON transitions (namespace, name, at DESC);

-- Every evaluated cron slot that was not restarted: missed or skipped, with its reason. A row may
-- stand for several slots (`slot_count`) when a long outage is summarized; `slot` is then the
-- first of them and `last_slot` the last.
CREATE TABLE slots (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    uid          TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    target       TEXT NOT NULL,
    slot         TEXT NOT NULL,
    last_slot    TEXT NOT NULL,
    slot_count   INTEGER NOT NULL DEFAULT 1 CHECK (slot_count >= 1),
    result       TEXT NOT NULL CHECK (result IN ('fired', 'missed', 'skipped')),
    reason       TEXT,
    window_start TEXT,
    window_end   TEXT,
    evaluated_at TEXT NOT NULL,
    UNIQUE (uid, slot)
);
CREATE INDEX slots_by_time ON slots (slot DESC, id DESC);
CREATE INDEX slots_by_object ON slots (uid, last_slot DESC);

-- One restart per (Eru, slot): the slot is the idempotency key of the restart itself.
CREATE TABLE restarts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uid         TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    target      TEXT NOT NULL,
    slot        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    outcome     TEXT NOT NULL DEFAULT 'in_progress'
                CHECK (outcome IN ('in_progress', 'succeeded', 'failed', 'abandoned')),
    reason      TEXT,
    UNIQUE (uid, slot)
);
CREATE INDEX restarts_by_time ON restarts (started_at DESC, id DESC);
