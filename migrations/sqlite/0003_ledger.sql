-- The slot ledger.
--
-- A restart is *decided* (journaled with the instant after which it is never patched) before its
-- patch is sent; `patched_at` is when the patch landed. Failed patches are counted with the API's
-- last message and the time the next try is due (backoff). Until the patch lands the slot has no
-- row in `slots`: it gets `fired` when the patch lands, or `missed`/`skipped` with the reason when
-- the restart is given up.
ALTER TABLE restarts RENAME COLUMN started_at TO decided_at;
ALTER TABLE restarts ADD COLUMN patched_at TEXT;
ALTER TABLE restarts ADD COLUMN deadline_at TEXT;
ALTER TABLE restarts ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE restarts ADD COLUMN last_error TEXT;
ALTER TABLE restarts ADD COLUMN last_attempt_at TEXT;
ALTER TABLE restarts ADD COLUMN next_attempt_at TEXT;

-- Spec epochs: each generation's slot-deciding spec (JSON: schedule, timeZone, suspend,
-- startingDeadlineSeconds, target) and the instant it took effect. Slots are accounted under the
-- epoch in force at each slot.
CREATE TABLE spec_epochs (
    uid            TEXT NOT NULL,
    generation     INTEGER NOT NULL,
    effective_from TEXT NOT NULL,
    observed_at    TEXT NOT NULL,
    spec           TEXT NOT NULL,
    PRIMARY KEY (uid, generation)
);
CREATE INDEX spec_epochs_by_time ON spec_epochs (uid, effective_from);

-- One row per Eru: the cursor (every slot at or before `accounted_through` is restarted or
-- recorded) and counters, kept in the same transaction as the rows they count, so retention can
-- prune rows without changing a total, and a reconcile reads one row instead of aggregating.
CREATE TABLE eru_ledger (
    uid               TEXT PRIMARY KEY,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    accounted_through TEXT,
    missed_slots      INTEGER NOT NULL DEFAULT 0,
    last_missed       TEXT,
    fired_slots       INTEGER NOT NULL DEFAULT 0,
    succeeded         INTEGER NOT NULL DEFAULT 0,
    failed            INTEGER NOT NULL DEFAULT 0,
    abandoned         INTEGER NOT NULL DEFAULT 0,
    last_success      TEXT,
    last_failure      TEXT,
    last_restart_slot TEXT,
    deleted_at        TEXT
);

-- An existing journal's counters, from its rows.
INSERT INTO eru_ledger (uid, namespace, name, accounted_through, missed_slots, last_missed, fired_slots,
                        succeeded, failed, abandoned, last_success, last_failure, last_restart_slot)
SELECT k.uid, k.namespace, k.name,
       (SELECT max(s) FROM (SELECT max(last_slot) AS s FROM slots WHERE uid = k.uid
                            UNION ALL SELECT max(slot) AS s FROM restarts WHERE uid = k.uid)),
       (SELECT coalesce(sum(slot_count), 0) FROM slots WHERE uid = k.uid AND result != 'fired'),
       (SELECT max(last_slot) FROM slots WHERE uid = k.uid AND result != 'fired'),
       (SELECT count(*) FROM slots WHERE uid = k.uid AND result = 'fired'),
       (SELECT count(*) FROM restarts WHERE uid = k.uid AND outcome = 'succeeded'),
       (SELECT count(*) FROM restarts WHERE uid = k.uid AND outcome = 'failed'),
       (SELECT count(*) FROM restarts WHERE uid = k.uid AND outcome = 'abandoned'),
       (SELECT max(finished_at) FROM restarts WHERE uid = k.uid AND outcome = 'succeeded'),
       (SELECT max(finished_at) FROM restarts WHERE uid = k.uid AND outcome = 'failed'),
       (SELECT max(slot) FROM restarts WHERE uid = k.uid)
FROM (SELECT uid, max(namespace) AS namespace, max(name) AS name
      FROM (SELECT uid, namespace, name FROM slots UNION ALL SELECT uid, namespace, name FROM restarts)
      GROUP BY uid) AS k;

-- Bounded reads of the runs a reconcile needs (those since its cursor), and filtered listings.
CREATE INDEX operator_runs_by_heartbeat ON operator_runs (heartbeat_at);
CREATE INDEX restarts_by_object ON restarts (namespace, name, id);
CREATE INDEX slots_by_name ON slots (namespace, name, id);
