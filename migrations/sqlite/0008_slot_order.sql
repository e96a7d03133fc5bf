-- A slot record stands for the slots from `slot` to `last_slot`: the last is never before the
-- first. A row that says otherwise (forged, or written by hand) made the audit slice backwards;
-- the audit now reports such rows as findings, and from here on the journal refuses them. SQLite
-- cannot add a CHECK constraint to an existing table, so triggers do it (RAISE(ABORT) fails the
-- statement as a CHECK would). Rows already in a journal are left as they are (the audit reports
-- them). Times are the journal's fixed-width UTC text, so text order is time order.
CREATE TRIGGER slots_last_slot_not_before_slot_insert
BEFORE INSERT ON slots
WHEN NEW.last_slot < NEW.slot
BEGIN
    SELECT RAISE(ABORT, 'slots: last_slot is before slot');
END;

CREATE TRIGGER slots_last_slot_not_before_slot_update
BEFORE UPDATE OF slot, last_slot ON slots
WHEN NEW.last_slot < NEW.slot
BEGIN
    SELECT RAISE(ABORT, 'slots: last_slot is before slot');
END;
