-- The live record under $1 for an operator: key, state, tool,
-- fingerprint, attempt, token, then ms since it entered its state, until
-- its lease lapses and until it expires, its payload and about.
SELECT key, state, tool, fingerprint, attempt, token,
       (extract(epoch FROM now() - changed_at) * 1000)::int8,
       (extract(epoch FROM lease_until - now()) * 1000)::int8,
       (extract(epoch FROM expires_at - now()) * 1000)::int8,
       payload, about
FROM {table} WHERE key = $1 AND expires_at > now()
