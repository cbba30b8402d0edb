-- The table of SqliteStore, schema version 3 (PRAGMA user_version), on a
-- new database. migrate_1_to_2.sql and migrate_2_to_3.sql bring older
-- databases to it.
CREATE TABLE IF NOT EXISTS idem_records (
    key         TEXT PRIMARY KEY NOT NULL,
    state       TEXT NOT NULL,     -- running | released | done | failed | unknown
    fingerprint BLOB NOT NULL,     -- 32 bytes, then 8 per field tag
    attempt     INTEGER NOT NULL,
    token       BLOB,              -- 16 bytes: the holder's (running) or the settler's
    lease_until INTEGER,           -- unix ms, running only
    payload     TEXT,              -- result (done) or error (failed)
    expires_at  INTEGER NOT NULL,  -- unix ms
    tool        TEXT,              -- the tool whose call it is (NULL: written by schema 1)
    changed_at  INTEGER,           -- unix ms the record entered its state (NULL: schema 1)
    about       TEXT               -- what the operation is, for operators (NULL: none given, or schema 1-2)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
