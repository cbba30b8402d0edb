-- The running record ?1 held with token ?2 settled as state ?3 with
-- payload ?4, kept until ?5; ?6 is now. A settled record keeps the token
-- that settled it, so the very same settle repeated (same token, state
-- and payload) matches and changes nothing.
UPDATE idem_records SET
    payload = CASE WHEN state = 'running' THEN ?4 ELSE payload END,
    expires_at = CASE WHEN state = 'running' THEN ?5 ELSE expires_at END,
    changed_at = CASE WHEN state = 'running' THEN ?6 ELSE changed_at END,
    lease_until = NULL, state = ?3
WHERE key = ?1 AND token = ?2 AND expires_at > ?6
  AND (state = 'running' OR (state = ?3 AND payload IS ?4))
