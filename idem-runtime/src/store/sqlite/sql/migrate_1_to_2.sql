-- Schema version 1 to 2: records name their tool and when they entered
-- their state. Rows written by version 1 keep NULL in both.
ALTER TABLE idem_records ADD COLUMN tool TEXT;
ALTER TABLE idem_records ADD COLUMN changed_at INTEGER;
