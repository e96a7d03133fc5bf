-- Restarts still in progress, found without a scan: the deletion sweep at start-up lists them all,
-- and a reconcile looks up its Eru's own.
CREATE INDEX restarts_open ON restarts (uid, slot) WHERE outcome = 'in_progress';
