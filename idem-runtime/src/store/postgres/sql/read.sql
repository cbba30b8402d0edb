-- The live record under $1: (state, fingerprint, attempt, payload, lease live).
SELECT state, fingerprint, attempt, payload, lease_until > now() FROM {table}
WHERE key = $1 AND expires_at > now()
