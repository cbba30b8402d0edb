-- The lease of the running record ?1 held with token ?2, extended to ?3
-- and its record kept until ?4; ?5 is now.
UPDATE idem_records SET lease_until = ?3, expires_at = ?4
WHERE key = ?1 AND state = 'running' AND token = ?2 AND expires_at > ?5
