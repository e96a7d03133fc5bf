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

-- The target's metadata.generation once a restart's patch had landed (the patch's answer, or the
-- cached object that first carried the slot): a template without the slot at a later generation
-- was written after the patch, so its revert is proven, never guessed from second-rounded times.
-- Null for restarts journaled before this column (their reverts are told once the rollout ends).
ALTER TABLE restarts ADD COLUMN landed_generation BIGINT;
