-- How many records have expired (what purge.sql would delete).
SELECT count(*) FROM {table} WHERE expires_at <= now()
