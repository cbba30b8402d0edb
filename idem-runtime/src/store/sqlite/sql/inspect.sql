-- The record under ?1 for an operator, expired or not: key, state, tool,
-- fingerprint, attempt, token, changed_at, lease_until, expires_at,
-- payload, about.
SELECT key, state, tool, fingerprint, attempt, token, changed_at, lease_until, expires_at, payload,
       about
FROM idem_records WHERE key = ?1
