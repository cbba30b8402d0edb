-- The lease of the running record ?1 held with token ?2, extended to ?3;
-- ?4 is now. The record is kept as long after its new lease as after the
-- old one: the claim's retention carries over.
UPDATE idem_records SET lease_until = ?3, expires_at = ?3 + (expires_at - lease_until)
WHERE key = ?1 AND state = 'running' AND token = ?2 AND expires_at > ?4
