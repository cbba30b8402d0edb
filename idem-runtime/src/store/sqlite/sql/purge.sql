-- Every record expired at ?1.
DELETE FROM idem_records WHERE expires_at <= ?1
