-- The table of idem's PostgresStore, its expiry index, and the table
-- holding its schema version; run again on a table of an older version,
-- it brings it to this one (every step is idempotent).
CREATE TABLE IF NOT EXISTS {table} (
    key         text PRIMARY KEY,
    state       text NOT NULL,        -- running | released | done | failed | unknown
    fingerprint bytea NOT NULL,       -- 32 bytes, then 8 per field tag
    attempt     integer NOT NULL,
    token       bytea,                -- 16 bytes: the holder's (running) or the settler's
    lease_until timestamptz,          -- running only
    payload     text,                 -- result (done) or error (failed)
    expires_at  timestamptz NOT NULL,
    tool        text,                 -- the tool whose call it is (NULL: written by schema 1)
    changed_at  timestamptz,          -- when it entered its state (NULL: schema 1)
    about       text                  -- what the operation is, for operators (NULL: none given, or schema 1-2)
);
-- Version 1 to 2: records name their tool and when they entered their state.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS tool text;
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS changed_at timestamptz;
-- Version 2 to 3: records say what their operation is.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS about text;
CREATE INDEX IF NOT EXISTS {index} ON {table} (expires_at);
CREATE TABLE IF NOT EXISTS {table}_schema (version integer NOT NULL);
INSERT INTO {table}_schema (version) SELECT {version} WHERE NOT EXISTS (SELECT 1 FROM {table}_schema);
UPDATE {table}_schema SET version = {version} WHERE version < {version};
