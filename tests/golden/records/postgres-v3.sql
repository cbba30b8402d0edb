-- A PostgreSQL table as idem 0.3 (schema version 3) writes it, with one
-- record per state, each naming its tool, when it entered its state and what it says
-- of its operation (about);
-- {table} is the table's name. tests/records.rs runs this in a schema of
-- its own and reads each record with the current PostgresStore. Never edit
-- it: add a file for a new schema version.
CREATE TABLE IF NOT EXISTS {table} (
    key         text PRIMARY KEY,
    state       text NOT NULL,        -- running | released | done | failed
    fingerprint bytea NOT NULL,       -- 32 bytes
    attempt     integer NOT NULL,
    token       bytea,                -- 16 bytes: the holder's (running) or the settler's
    lease_until timestamptz,          -- running only
    payload     text,                 -- result (done) or error (failed)
    expires_at  timestamptz NOT NULL,
    tool        text,                 -- the tool whose call it is (NULL: written by schema 1)
    changed_at  timestamptz,          -- when it entered its state (NULL: schema 1)
    about       text                  -- what the operation is (NULL: none given, or schema 1-2)
);
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON {table} (expires_at);
CREATE TABLE IF NOT EXISTS {table}_schema (version integer NOT NULL);
INSERT INTO {table}_schema (version) SELECT 3 WHERE NOT EXISTS (SELECT 1 FROM {table}_schema);
INSERT INTO {table} VALUES ('running', 'running', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, '\x0123456789abcdef0123456789abcdef', '2100-01-01Z', NULL, '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO {table} VALUES ('lapsed', 'running', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 1, '\x0123456789abcdef0123456789abcdef', '1970-01-01Z', NULL, '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO {table} VALUES ('released', 'released', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 2, '\x0123456789abcdef0123456789abcdef', NULL, NULL, '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO {table} VALUES ('done', 'done', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, '\x0123456789abcdef0123456789abcdef', NULL, '{"charge":"ch_1","amount":1250}', '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO {table} VALUES ('failed', 'failed', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 0, '\x0123456789abcdef0123456789abcdef', NULL, 'card declined | code 51', '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
INSERT INTO {table} VALUES ('done_without_token', 'done', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 3, NULL, NULL, '{"legacy":true}', '2100-01-01Z', 'charge_card', '2000-01-01Z', NULL);
-- The unknown state (a tool that refuses to rerun an uncertain operation):
-- the reason is the payload, the token the one that made it unknown.
INSERT INTO {table} VALUES ('unknown', 'unknown', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 1, '\x0123456789abcdef0123456789abcdef', NULL, 'the claim of attempt 0 lapsed', '2100-01-01Z', 'charge_card', '2000-01-01Z', '{"tenant":"acme","run":"run-7","arguments":{"amount":1250,"card":"(hidden)","memo":"a|b"}}');
