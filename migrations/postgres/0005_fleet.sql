-- Fleet-safe restarts (issue 14); the same meaning as migrations/sqlite/0005_fleet.sql.
--
-- `slots.note` says what a reason alone does not: the blackout window a `blackout` slot fell in
-- (by name), why a target is `target_not_rollable`, what a `dry_run` would have patched.
-- `restarts.outcome` gains `dry_run` (decided, never patched; the patch it would have sent is its
-- reason).
ALTER TABLE slots ADD COLUMN note TEXT;
ALTER TABLE restarts DROP CONSTRAINT restarts_outcome_check;
ALTER TABLE restarts ADD CONSTRAINT restarts_outcome_check
    CHECK (outcome IN ('in_progress', 'succeeded', 'failed', 'abandoned', 'dry_run'));
