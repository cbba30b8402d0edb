-- The running record $1 held with token $2 settled as state $3 with
-- payload $4, kept $5 ms. An unknown record is settled (resolved) the
-- same way with the token that made it unknown, into any other state. A
-- settled row keeps the token that settled it, so the very same settle
-- repeated (its first reply lost: same token, state and payload) matches
-- and changes nothing.
UPDATE {table} SET
    payload = CASE WHEN state IN ('running', 'unknown') AND state <> $3 THEN $4 ELSE payload END,
    expires_at = CASE WHEN state IN ('running', 'unknown') AND state <> $3
        THEN now() + $5::float8 * interval '1 millisecond' ELSE expires_at END,
    changed_at = CASE WHEN state IN ('running', 'unknown') AND state <> $3 THEN now() ELSE changed_at END,
    lease_until = NULL, state = $3
WHERE key = $1 AND token = $2 AND expires_at > now()
  AND (state = 'running' OR (state = 'unknown' AND $3 <> 'unknown')
       OR (state = $3 AND payload IS NOT DISTINCT FROM $4))
