-- The record under ?1 for an operator, expired or not: key, state, tool,
-- fingerprint, attempt, token, changed_at, lease_until, expires_at,
-- payload.
SELECT key, state, tool, fingerprint, attempt, token, changed_at, lease_until, expires_at, payload
FROM idem_records WHERE key = ?1
