-- Up to $5 live records with keys after $1 and starting with $2, of state
-- $3 and tool $4 when those are not NULL, in key order (a walk of the
-- primary key's index from $1), payloads left out. Columns as inspect.sql.
SELECT key, state, tool, fingerprint, attempt, token,
       (extract(epoch FROM now() - changed_at) * 1000)::int8,
       (extract(epoch FROM lease_until - now()) * 1000)::int8,
       (extract(epoch FROM expires_at - now()) * 1000)::int8,
       NULL::text, about
FROM {table}
WHERE key > $1 AND starts_with(key, $2) AND expires_at > now()
  AND ($3::text IS NULL OR state = $3) AND ($4::text IS NULL OR tool = $4)
ORDER BY key LIMIT $5
