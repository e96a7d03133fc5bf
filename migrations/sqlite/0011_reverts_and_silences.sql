-- A restart another field manager undid: who removed or replaced `mtsre.meitu.com/restartedAt`
-- on the pod template after the patch (`reverted_by`, null when the managedFields name no writer
-- of it) and when the operator saw it (`reverted_at`). Set once; the restart's outcome and its
-- slot's record stay as they are (the slot is still accounted once).
ALTER TABLE restarts ADD COLUMN reverted_by TEXT;
ALTER TABLE restarts ADD COLUMN reverted_at TEXT;

-- The Alertmanager silence a restart held while it rolled out (`spec.silence`): its id, the end
-- it was created with (it lapses then even if the operator dies), and when the operator expired
-- it (at the rollout's end).
ALTER TABLE restarts ADD COLUMN silence_id TEXT;
ALTER TABLE restarts ADD COLUMN silence_until TEXT;
ALTER TABLE restarts ADD COLUMN silence_expired_at TEXT;
