-- A slot record's last slot is never before its first (the same rule as
-- migrations/sqlite/0008_slot_order.sql). NOT VALID: rows already in a journal are not checked
-- (the audit reports any that break it); every row inserted or updated from here on is.
ALTER TABLE slots ADD CONSTRAINT slots_last_slot_not_before_slot CHECK (last_slot >= slot) NOT VALID;
