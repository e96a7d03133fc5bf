-- The leadership fence (a fencing token): the epoch of the newest process that took the journal
-- to write. A process takes the next epoch when it starts to write (Journal::take_fence), and
-- every write transaction reads the row last, just before its commit, and is rolled back when the
-- epoch is no longer its own: a leader that lost its lease in a freeze and resumed cannot commit
-- anything once a newer one took the journal. One row, always there.
CREATE TABLE leader_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT NOT NULL
);
INSERT INTO leader_fence (id, epoch) VALUES (1, 0);
