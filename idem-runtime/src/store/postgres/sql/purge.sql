-- Every expired record.
DELETE FROM {table} WHERE expires_at <= now()
