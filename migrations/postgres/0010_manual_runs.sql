-- Manual runs; the same meaning as migrations/sqlite/0010_manual_runs.sql.
--
-- One unscheduled restart per Eru and token (`mtsre.meitu.com/run-now`), kept apart from the
-- slots; `requested_by` is the field manager that set the annotation.
CREATE TABLE manual_runs (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid             TEXT COLLATE "C" NOT NULL,
    namespace       TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    target          TEXT COLLATE "C" NOT NULL,
    token           TEXT COLLATE "C" NOT NULL,
    requested_by    TEXT COLLATE "C",
    requested_at    TEXT COLLATE "C" NOT NULL,
    deadline_at     TEXT COLLATE "C" NOT NULL,
    decided_at      TEXT COLLATE "C",
    patched_at      TEXT COLLATE "C",
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_attempt_at TEXT COLLATE "C",
    next_attempt_at TEXT COLLATE "C",
    finished_at     TEXT COLLATE "C",
    outcome         TEXT COLLATE "C" NOT NULL DEFAULT 'waiting'
                    CHECK (outcome IN ('waiting', 'in_progress', 'succeeded', 'failed', 'abandoned',
                                       'refused', 'dry_run')),
    reason          TEXT COLLATE "C",
    UNIQUE (uid, token)
);
CREATE INDEX manual_runs_by_time ON manual_runs (requested_at DESC, id DESC);
CREATE INDEX manual_runs_open ON manual_runs (uid) WHERE outcome = 'in_progress';
