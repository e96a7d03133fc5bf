-- Each Eru's slots in its rows (fired, and missed or skipped), kept by a trigger as rows come and
-- go: the audit cross-checks the ledger's running counters (written by the operator with each
-- record) against these (written by the database with each row), without reading every row of
-- the journal (1 M rows took the cross-check 1.4 s). A row inserted, changed or deleted by hand
-- moves these as it moved the sums they replace. Rows already in the journal are summed once here.
-- No row may come between the sums and the trigger (a leader still writing during an upgrade):
-- the table is locked against writes until the migration commits.
LOCK TABLE slots IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE slot_totals (
    uid       TEXT COLLATE "C" PRIMARY KEY,
    fired     BIGINT NOT NULL DEFAULT 0,
    not_fired BIGINT NOT NULL DEFAULT 0
);

INSERT INTO slot_totals (uid, fired, not_fired)
SELECT uid,
       SUM(CASE WHEN result = 'fired' THEN slot_count ELSE 0 END),
       SUM(CASE WHEN result = 'fired' THEN 0 ELSE slot_count END)
FROM slots GROUP BY uid;

CREATE FUNCTION slot_totals_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE slot_totals
        SET fired = fired - CASE WHEN OLD.result = 'fired' THEN OLD.slot_count ELSE 0 END,
            not_fired = not_fired - CASE WHEN OLD.result = 'fired' THEN 0 ELSE OLD.slot_count END
        WHERE uid = OLD.uid;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO slot_totals AS t (uid, fired, not_fired)
        VALUES (NEW.uid,
                CASE WHEN NEW.result = 'fired' THEN NEW.slot_count ELSE 0 END,
                CASE WHEN NEW.result = 'fired' THEN 0 ELSE NEW.slot_count END)
        ON CONFLICT (uid) DO UPDATE
        SET fired = t.fired + EXCLUDED.fired, not_fired = t.not_fired + EXCLUDED.not_fired;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER slot_totals_insert_delete
AFTER INSERT OR DELETE ON slots
FOR EACH ROW EXECUTE FUNCTION slot_totals_count();

CREATE TRIGGER slot_totals_update
AFTER UPDATE OF uid, result, slot_count ON slots
FOR EACH ROW EXECUTE FUNCTION slot_totals_count();
