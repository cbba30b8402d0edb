-- The live record under $1: (state, fingerprint, attempt, payload, lease
-- live, age ms).
SELECT state, fingerprint, attempt, payload, lease_until > now(),
       (extract(epoch FROM now() - changed_at) * 1000)::bigint FROM {table}
WHERE key = $1 AND expires_at > now()
