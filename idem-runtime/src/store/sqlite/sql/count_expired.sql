-- How many records have expired at ?1 (what purge.sql would delete).
SELECT count(*) FROM idem_records WHERE expires_at <= ?1
