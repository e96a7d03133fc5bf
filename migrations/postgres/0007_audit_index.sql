-- The audit's window read; the same meaning as migrations/sqlite/0007_audit_index.sql.
CREATE INDEX slots_by_last_slot ON slots (last_slot);
