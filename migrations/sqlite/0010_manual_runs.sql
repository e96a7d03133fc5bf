-- Manual runs (`mtsre.meitu.com/run-now: <token>` on an Eru): one unscheduled restart per token,
-- kept apart from the slots so the slot arithmetic stays exact. A row is written when the token is
-- first seen (`waiting`), then decided (`in_progress`), patched (`patched_at`), and ended:
-- `succeeded`, `failed`, `abandoned` (its patch never landed), `refused` (it could not start by
-- its deadline, or the Eru was suspended, invalid or without target) or `dry_run`. `requested_by`
-- is the field manager that set the annotation, from the Eru's managedFields.
CREATE TABLE manual_runs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    uid             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    name            TEXT NOT NULL,
    target          TEXT NOT NULL,
    token           TEXT NOT NULL,
    requested_by    TEXT,
    requested_at    TEXT NOT NULL,
    deadline_at     TEXT NOT NULL,
    decided_at      TEXT,
    patched_at      TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_attempt_at TEXT,
    next_attempt_at TEXT,
    finished_at     TEXT,
    outcome         TEXT NOT NULL DEFAULT 'waiting'
                    CHECK (outcome IN ('waiting', 'in_progress', 'succeeded', 'failed', 'abandoned',
                                       'refused', 'dry_run')),
    reason          TEXT,
    UNIQUE (uid, token)
);
CREATE INDEX manual_runs_by_time ON manual_runs (requested_at DESC, id DESC);
CREATE INDEX manual_runs_open ON manual_runs (uid) WHERE outcome = 'in_progress';
