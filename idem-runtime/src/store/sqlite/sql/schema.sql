-- The table of SqliteStore, schema version 1 (PRAGMA user_version).
CREATE TABLE IF NOT EXISTS idem_records (
    key         TEXT PRIMARY KEY NOT NULL,
    state       TEXT NOT NULL,     -- running | released | done | failed
    fingerprint BLOB NOT NULL,     -- 32 bytes
    attempt     INTEGER NOT NULL,
    token       BLOB,              -- 16 bytes: the holder's (running) or the settler's
    lease_until INTEGER,           -- unix ms, running only
    payload     TEXT,              -- result (done) or error (failed)
    expires_at  INTEGER NOT NULL   -- unix ms
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
