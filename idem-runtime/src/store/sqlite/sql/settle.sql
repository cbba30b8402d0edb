-- The record ?1 held with token ?2 settled as state ?3 with payload ?4,
-- kept until ?5; ?6 is now; ?7 the about an approval writes. What may be
-- settled into what is `Outcome::settles`: a running record by its holder
-- into any state; an unknown one, with the token that made it unknown,
-- into done, failed or released (resolved); an awaiting one, with the
-- token that made it awaiting, into approved, failed (refused) or
-- released; an approved one, with that token still, into awaiting again
-- (revoked). A settled record keeps the token that settled it, so the very
-- same settle repeated (same token, state, payload and about) matches and
-- changes nothing.
UPDATE idem_records SET
    payload = CASE WHEN state <> ?3 THEN ?4 ELSE payload END,
    expires_at = CASE WHEN state <> ?3 THEN ?5 ELSE expires_at END,
    changed_at = CASE WHEN state <> ?3 THEN ?6 ELSE changed_at END,
    about = CASE WHEN state <> ?3 AND ?3 = 'approved' THEN ?7 ELSE about END,
    lease_until = NULL, state = ?3
WHERE key = ?1 AND token = ?2 AND expires_at > ?6
  AND (state = 'running'
       OR (state = 'unknown' AND ?3 IN ('done', 'failed', 'released'))
       OR (state = 'awaiting' AND ?3 IN ('approved', 'failed', 'released'))
       OR (state = 'approved' AND ?3 = 'awaiting')
       OR (state = ?3 AND payload IS ?4 AND (?3 <> 'approved' OR about IS ?7)))
