-- The lease of the running record $1 held with token $2 extended to $3 ms
-- from now; the record is kept as long after its new lease as after the
-- old one (the claim's retention carries over).
UPDATE {table} SET lease_until = now() + $3::float8 * interval '1 millisecond',
    expires_at = now() + $3::float8 * interval '1 millisecond' + (expires_at - lease_until)
WHERE key = $1 AND state = 'running' AND token = $2 AND expires_at > now()
