-- Pauses on failure (spec.failurePolicy): one row per pause, keyed by the Eru and the instant it
-- paused (whole seconds, as the status shows it), so a replay adds nothing; `resumed_at` and
-- `resumed_by` are set once, when a person resumes it. The latest row of an Eru tells whether a
-- pause holds; the restarts counted toward the next one are those decided after its resume.
CREATE TABLE failure_pauses (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid        TEXT COLLATE "C" NOT NULL,
    namespace  TEXT COLLATE "C" NOT NULL,
    name       TEXT COLLATE "C" NOT NULL,
    since      TEXT COLLATE "C" NOT NULL,
    why        TEXT COLLATE "C" NOT NULL,
    resumed_at TEXT COLLATE "C",
    resumed_by TEXT COLLATE "C",
    UNIQUE (uid, since)
);
