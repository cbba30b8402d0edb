-- The lease of the running record $1 held with token $2 extended to $3 ms
-- from now, the record kept $4 ms after it.
UPDATE {table} SET lease_until = now() + $3::float8 * interval '1 millisecond',
    expires_at = now() + ($3::float8 + $4::float8) * interval '1 millisecond'
WHERE key = $1 AND state = 'running' AND token = $2 AND expires_at > now()
