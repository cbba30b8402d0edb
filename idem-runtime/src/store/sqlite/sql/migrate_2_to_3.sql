-- Schema version 2 to 3: records say what their operation is (an About,
-- for operators). Rows written before keep NULL.
ALTER TABLE idem_records ADD COLUMN about TEXT;
