-- Notification lanes; the same meaning as migrations/sqlite/0013_notification_lanes.sql.
--
-- Notification lanes: each sink delivers on its own, so its due rows are found by sink and retry
-- instant (the lane's query), never by scanning the other sinks' backlog. Settled rows are found
-- by the instant they were settled (the prune, which deletes them in batches until none older
-- than the maximum age is left), and dropped ones by sink and reason (the audit's drop counts).
CREATE INDEX notifications_due_by_sink ON notifications (sink, next_attempt_at, id)
    WHERE delivered_at IS NULL AND dropped_at IS NULL;
CREATE INDEX notifications_settled ON notifications ((coalesce(delivered_at, dropped_at)));
CREATE INDEX notifications_dropped ON notifications (sink, drop_reason)
    WHERE dropped_at IS NOT NULL;
