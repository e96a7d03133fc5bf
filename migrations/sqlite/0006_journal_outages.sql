-- Journal outages: when this journal took no writes (disk full, database down) although the
-- operator ran. A row is the window `(started_at, ended_at]` from the last write that worked
-- before the first one that failed to the first one that worked again; it is written in the same
-- transaction as that first write, so no slot of the window is recorded before the window is.
-- Slots in it that were not restarted are `missed/journal_unavailable` with the window (an
-- outage the operator did not live through is not here: a process that dies during one leaves
-- the stretch to its run's last heartbeat, `operator_down`). `run_id` is the operator run that
-- saw it (`operator_runs.id`; null if none had started). Accounting reads the windows that end
-- after an Eru's cursor, hence the index on `ended_at`.
CREATE TABLE journal_outages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER,
    started_at TEXT NOT NULL,
    ended_at   TEXT NOT NULL,
    UNIQUE (run_id, started_at)
);
CREATE INDEX journal_outages_by_end ON journal_outages (ended_at);
