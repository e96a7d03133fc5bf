-- Fleet-safe restarts (issue 14).
--
-- `slots.note` says what a reason alone does not: the blackout window a `blackout` slot fell in
-- (by name), why a target is `target_not_rollable`, what a `dry_run` would have patched.
--
-- `restarts.outcome` gains `dry_run`: a dry-run Eru journals each slot's restart as decided and
-- ended `dry_run`, with the patch it would have sent as its reason; nothing was patched. SQLite
-- cannot change a CHECK constraint in place, so the table is rebuilt (same columns, same order,
-- same keys and indexes).
ALTER TABLE slots ADD COLUMN note TEXT;

CREATE TABLE restarts_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    uid             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    name            TEXT NOT NULL,
    target          TEXT NOT NULL,
    slot            TEXT NOT NULL,
    decided_at      TEXT NOT NULL,
    finished_at     TEXT,
    outcome         TEXT NOT NULL DEFAULT 'in_progress'
                    CHECK (outcome IN ('in_progress', 'succeeded', 'failed', 'abandoned', 'dry_run')),
    reason          TEXT,
    patched_at      TEXT,
    deadline_at     TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_attempt_at TEXT,
    next_attempt_at TEXT,
    UNIQUE (uid, slot)
);
INSERT INTO restarts_new (id, uid, namespace, name, target, slot, decided_at, finished_at, outcome, reason,
                          patched_at, deadline_at, attempts, last_error, last_attempt_at, next_attempt_at)
SELECT id, uid, namespace, name, target, slot, decided_at, finished_at, outcome, reason,
       patched_at, deadline_at, attempts, last_error, last_attempt_at, next_attempt_at
FROM restarts;
DROP TABLE restarts;
ALTER TABLE restarts_new RENAME TO restarts;
CREATE INDEX restarts_by_time ON restarts (decided_at DESC, id DESC);
CREATE INDEX restarts_open ON restarts (uid, slot) WHERE outcome = 'in_progress';
CREATE INDEX restarts_by_name ON restarts (name, namespace, id);
