-- The leadership fence; the same meaning as migrations/sqlite/0012_leader_fence.sql. Every write
-- transaction ends with `SELECT epoch FROM leader_fence WHERE id = 1 FOR SHARE`: a new leader's
-- `UPDATE ... SET epoch = epoch + 1` waits for the transactions that read the old epoch to end,
-- and every transaction that reads after it sees the new one, so no write of an older epoch
-- commits after a newer epoch was taken.
CREATE TABLE leader_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT NOT NULL
);
INSERT INTO leader_fence (id, epoch) VALUES (1, 0);
