-- The table of idem's PostgresStore, its expiry index, and the table
-- holding its schema version.
CREATE TABLE IF NOT EXISTS {table} (
    key         text PRIMARY KEY,
    state       text NOT NULL,        -- running | released | done | failed
    fingerprint bytea NOT NULL,       -- 32 bytes
    attempt     integer NOT NULL,
    token       bytea,                -- 16 bytes: the holder's (running) or the settler's
    lease_until timestamptz,          -- running only
    payload     text,                 -- result (done) or error (failed)
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {index} ON {table} (expires_at);
CREATE TABLE IF NOT EXISTS {table}_schema (version integer NOT NULL);
INSERT INTO {table}_schema (version) SELECT {version} WHERE NOT EXISTS (SELECT 1 FROM {table}_schema);
