-- Up to ?7 live records (expiring after ?4) with keys after ?1 and in
-- [?2, ?3), of state ?5 and tool ?6 when those are not NULL, in key order
-- (the primary key's index), payloads left out. Columns as inspect.sql.
SELECT key, state, tool, fingerprint, attempt, token, changed_at, lease_until, expires_at, NULL,
       about
FROM idem_records
WHERE key > ?1 AND key >= ?2 AND key < ?3 AND expires_at > ?4
  AND (?5 IS NULL OR state = ?5) AND (?6 IS NULL OR tool = ?6)
ORDER BY key LIMIT ?7
