-- A SQLite database as idem 0.3 (schema version 3) writes it: its table,
-- its index, and one record per state, each naming its tool, when it
-- entered its state and what it says of its operation (about).
-- tests/records.rs runs this on a new file and reads
-- each record with the current SqliteStore. Never edit it: add a file for
-- a new schema version. Times are unix ms; 4102444800000 is 2100-01-01,
-- 1 is long past.
CREATE TABLE IF NOT EXISTS idem_records (
    key         TEXT PRIMARY KEY NOT NULL,
    state       TEXT NOT NULL,     -- running | released | done | failed
    fingerprint BLOB NOT NULL,     -- 32 bytes
    attempt     INTEGER NOT NULL,
    token       BLOB,              -- 16 bytes: the holder's (running) or the settler's
    lease_until INTEGER,           -- unix ms, running only
    payload     TEXT,              -- result (done) or error (failed)
    expires_at  INTEGER NOT NULL,  -- unix ms
    tool        TEXT,              -- the tool whose call it is (NULL: written by schema 1)
    changed_at  INTEGER,           -- unix ms the record entered its state (NULL: schema 1)
    about       TEXT               -- what the operation is (NULL: none given, or schema 1-2)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
PRAGMA user_version = 3;
INSERT INTO idem_records VALUES ('running', 'running', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, X'0123456789abcdef0123456789abcdef', 4102444800000, NULL, 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO idem_records VALUES ('lapsed', 'running', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 1, X'0123456789abcdef0123456789abcdef', 1, NULL, 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO idem_records VALUES ('released', 'released', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 2, X'0123456789abcdef0123456789abcdef', NULL, NULL, 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO idem_records VALUES ('done', 'done', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, X'0123456789abcdef0123456789abcdef', NULL, '{"charge":"ch_1","amount":1250}', 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO idem_records VALUES ('failed', 'failed', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, X'0123456789abcdef0123456789abcdef', NULL, 'card declined | code 51', 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO idem_records VALUES ('done_without_token', 'done', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 3, NULL, NULL, '{"legacy":true}', 4102444800000, 'charge_card', 1, NULL);
-- The unknown state (a tool that refuses to rerun an uncertain operation):
-- the reason is the payload, the token the one that made it unknown.
INSERT INTO idem_records VALUES ('unknown', 'unknown', X'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 1, X'0123456789abcdef0123456789abcdef', NULL, 'the claim of attempt 0 lapsed', 4102444800000, 'charge_card', 1, '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
