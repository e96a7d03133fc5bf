-- Journal outages; the same meaning as migrations/sqlite/0006_journal_outages.sql.
--
-- When this journal took no writes (disk full, database down) although the operator ran: the
-- window `(started_at, ended_at]` from the last write that worked before the first one that
-- failed to the first one that worked again, written in the same transaction as that first
-- write. Slots in it that were not restarted are `missed/journal_unavailable` with the window.
-- `run_id` is the operator run that saw it (null if none had started). Accounting reads the
-- windows that end after an Eru's cursor, hence the index on `ended_at`.
CREATE TABLE journal_outages (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     BIGINT,
    started_at TEXT COLLATE "C" NOT NULL,
    ended_at   TEXT COLLATE "C" NOT NULL,
    UNIQUE (run_id, started_at)
);
CREATE INDEX journal_outages_by_end ON journal_outages (ended_at);
