-- The audit of a window reads the slot records that reach into it (`last_slot >= since`, with
-- `slot < until`): an index on `last_slot` makes that a range of the window's rows, not a scan of
-- the whole journal (1 M rows: seconds per page).
CREATE INDEX slots_by_last_slot ON slots (last_slot);
