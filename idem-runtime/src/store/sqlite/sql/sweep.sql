-- Up to ?2 records expired at ?1, deleted on the side of a claim.
DELETE FROM idem_records WHERE key IN
    (SELECT key FROM idem_records WHERE expires_at <= ?1 LIMIT ?2)
