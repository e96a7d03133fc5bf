-- Pauses on failure (spec.failurePolicy): one row per pause, keyed by the Eru and the instant it
-- paused (whole seconds, as the status shows it), so a replay adds nothing; `resumed_at` and
-- `resumed_by` are set once, when a person resumes it. The latest row of an Eru tells whether a
-- pause holds; the restarts counted toward the next one are those decided after its resume.
CREATE TABLE failure_pauses (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid        TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    since      TEXT NOT NULL,
    why        TEXT NOT NULL,
    resumed_at TEXT,
    resumed_by TEXT,
    UNIQUE (uid, since)
);
