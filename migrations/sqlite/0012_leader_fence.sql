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

-- The target's metadata.generation once a restart's patch had landed (the patch's answer, or the
-- cached object that first carried the slot): a template without the slot at a later generation
-- was written after the patch, so its revert is proven, never guessed from second-rounded times.
-- Null for restarts journaled before this column (their reverts are told once the rollout ends).
ALTER TABLE restarts ADD COLUMN landed_generation BIGINT;
