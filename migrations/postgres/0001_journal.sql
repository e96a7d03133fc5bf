-- The journal on PostgreSQL: the same tables, columns, unique keys and indexes as the SQLite
-- journal after migrations/sqlite/0001..0004, created at once. No PostgreSQL journal existed
-- before these, so there is nothing to migrate step by step; a later change to the schema takes
-- the next free number (0005, ...) in both folders, with the same meaning in each.
--
-- Timestamps are RFC 3339 UTC strings with millisecond precision and a trailing Z (fixed width),
-- so text order is time order. Every text column that is compared, ordered or part of a key is
-- COLLATE "C": byte order, whatever the server's locale (under a language collation `-` and `.`
-- can be ignored or weighed differently, and the same query could order rows otherwise than on
-- SQLite). Integers are BIGINT, ids identity columns: they read back as i64 like SQLite's INTEGER.
-- Unique keys make every append idempotent: replaying a reconcile after a crash writes nothing twice.

-- One row per operator process; the heartbeat bounds how long it was up, so the gap between one
-- run's last heartbeat and the next run's start is a downtime window that explains missed slots.
CREATE TABLE operator_runs (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at   TEXT COLLATE "C" NOT NULL,
    heartbeat_at TEXT COLLATE "C" NOT NULL,
    stopped_at   TEXT COLLATE "C",
    version      TEXT NOT NULL,
    instance     TEXT NOT NULL
);
CREATE INDEX operator_runs_by_heartbeat ON operator_runs (heartbeat_at);

-- Every state-machine transition, with the event that caused it. `observed` is the resourceVersion
-- of the object the reconcile saw: the same observation replayed yields the same key.
CREATE TABLE transitions (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       TEXT COLLATE "C" NOT NULL,
    namespace  TEXT COLLATE "C" NOT NULL,
    name       TEXT COLLATE "C" NOT NULL,
    uid        TEXT COLLATE "C" NOT NULL,
    observed   TEXT COLLATE "C" NOT NULL,
    from_state TEXT COLLATE "C" NOT NULL,
    to_state   TEXT COLLATE "C" NOT NULL,
    event      TEXT COLLATE "C" NOT NULL,
    at         TEXT COLLATE "C" NOT NULL,
    detail     TEXT NOT NULL DEFAULT '{}',
    UNIQUE (uid, observed, from_state, to_state, event)
);
CREATE INDEX transitions_by_time ON transitions (at DESC, id DESC);
-- Listings of one object (`/transitions?name=…`, with or without a namespace) read a range of
-- this index, newest first.
CREATE INDEX transitions_by_name ON transitions (name, namespace, id);

-- Every evaluated cron slot that was not restarted: missed or skipped, with its reason (and, since
-- the slot ledger, fired ones). A row may stand for several slots (`slot_count`) when a long
-- outage is summarized; `slot` is then the first of them and `last_slot` the last.
CREATE TABLE slots (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid          TEXT COLLATE "C" NOT NULL,
    namespace    TEXT COLLATE "C" NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    target       TEXT COLLATE "C" NOT NULL,
    slot         TEXT COLLATE "C" NOT NULL,
    last_slot    TEXT COLLATE "C" NOT NULL,
    slot_count   BIGINT NOT NULL DEFAULT 1 CHECK (slot_count >= 1),
    result       TEXT COLLATE "C" NOT NULL CHECK (result IN ('fired', 'missed', 'skipped')),
    reason       TEXT COLLATE "C",
    window_start TEXT COLLATE "C",
    window_end   TEXT COLLATE "C",
    evaluated_at TEXT COLLATE "C" NOT NULL,
    UNIQUE (uid, slot)
);
CREATE INDEX slots_by_time ON slots (slot DESC, id DESC);
CREATE INDEX slots_by_object ON slots (uid, last_slot DESC);
CREATE INDEX slots_by_name ON slots (name, namespace, id);

-- One restart per (Eru, slot): the slot is the idempotency key of the restart itself. A restart
-- is *decided* (journaled with the instant after which it is never patched) before its patch is
-- sent; `patched_at` is when the patch landed. Failed patches are counted with the API's last
-- message and the time the next try is due (backoff). Columns in SQLite's order (its 0002 added
-- the last six).
CREATE TABLE restarts (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid             TEXT COLLATE "C" NOT NULL,
    namespace       TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    target          TEXT COLLATE "C" NOT NULL,
    slot            TEXT COLLATE "C" NOT NULL,
    decided_at      TEXT COLLATE "C" NOT NULL,
    finished_at     TEXT COLLATE "C",
    outcome         TEXT COLLATE "C" NOT NULL DEFAULT 'in_progress'
                    CHECK (outcome IN ('in_progress', 'succeeded', 'failed', 'abandoned')),
    reason          TEXT COLLATE "C",
    patched_at      TEXT COLLATE "C",
    deadline_at     TEXT COLLATE "C",
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_attempt_at TEXT COLLATE "C",
    next_attempt_at TEXT COLLATE "C",
    UNIQUE (uid, slot)
);
CREATE INDEX restarts_by_time ON restarts (decided_at DESC, id DESC);
-- Restarts still in progress, found without a scan: the deletion sweep at start-up lists them all,
-- and a reconcile looks up its Eru's own.
CREATE INDEX restarts_open ON restarts (uid, slot) WHERE outcome = 'in_progress';
CREATE INDEX restarts_by_name ON restarts (name, namespace, id);

-- Spec epochs: each generation's slot-deciding spec (JSON: schedule, timeZone, suspend,
-- startingDeadlineSeconds, target) and the instant it took effect. Slots are accounted under the
-- epoch in force at each slot.
CREATE TABLE spec_epochs (
    uid            TEXT COLLATE "C" NOT NULL,
    generation     BIGINT NOT NULL,
    effective_from TEXT COLLATE "C" NOT NULL,
    observed_at    TEXT COLLATE "C" NOT NULL,
    spec           TEXT NOT NULL,
    PRIMARY KEY (uid, generation)
);
CREATE INDEX spec_epochs_by_time ON spec_epochs (uid, effective_from);

-- One row per Eru: the cursor (every slot at or before `accounted_through` is restarted or
-- recorded) and counters, kept in the same transaction as the rows they count, so retention can
-- prune rows without changing a total, and a reconcile reads one row instead of aggregating.
CREATE TABLE eru_ledger (
    uid               TEXT COLLATE "C" PRIMARY KEY,
    namespace         TEXT COLLATE "C" NOT NULL,
    name              TEXT COLLATE "C" NOT NULL,
    accounted_through TEXT COLLATE "C",
    missed_slots      BIGINT NOT NULL DEFAULT 0,
    last_missed       TEXT COLLATE "C",
    fired_slots       BIGINT NOT NULL DEFAULT 0,
    succeeded         BIGINT NOT NULL DEFAULT 0,
    failed            BIGINT NOT NULL DEFAULT 0,
    abandoned         BIGINT NOT NULL DEFAULT 0,
    last_success      TEXT COLLATE "C",
    last_failure      TEXT COLLATE "C",
    last_restart_slot TEXT COLLATE "C",
    deleted_at        TEXT COLLATE "C"
);
