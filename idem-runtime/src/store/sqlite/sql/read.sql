-- The record under ?1, expired or not.
SELECT state, fingerprint, attempt, lease_until, payload, expires_at, changed_at
FROM idem_records WHERE key = ?1
