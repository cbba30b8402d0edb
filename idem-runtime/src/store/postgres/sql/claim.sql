-- Claims key $1 (fingerprint $2, token $3, lease $4 ms, kept $5 ms after
-- it, for tool $6, about $7), or reads back what holds it.
--
-- A recorded outcome is read without a lock (replays do not queue on the
-- row); otherwise the row is taken over when it may be (expired, released,
-- its lease lapsed, running with this very token: our own claim sent
-- again, or approved for these very arguments: the approval used up, its
-- about kept), else read back. The read-back comes from the statement's
-- snapshot, which in a race with a concurrent claim can be older than the
-- row the insert conflicted with: missing, released or lapsed. Then the
-- claim asks again (see `PostgresStore::claim`).
--
-- Answers one row of (state, fingerprint, attempt, payload, lease live,
-- age ms): state 'acquired' with the attempt taken, as payload 'approved'
-- when it used up an approval, and as "lease live" whether it took over a
-- lapsed claim; or the record found.
--
-- Whether the row taken over was a lapsed claim is read from the
-- statement's snapshot, with the same now(): a row another transaction
-- changed since can only have been released or purged meanwhile (a live
-- or settled one is not taken over), so the answer errs towards "lapsed",
-- the cautious side.
WITH done AS (
    SELECT state, fingerprint, attempt, payload, NULL::boolean AS lease_live,
           NULL::bigint AS age_ms FROM {table}
    WHERE key = $1 AND state IN ('done', 'failed') AND expires_at > now()
), taken AS (
    INSERT INTO {table} AS r (key, state, fingerprint, attempt, token, lease_until, payload, expires_at, tool, changed_at, about)
    SELECT $1, 'running', $2, 0, $3,
           now() + $4::float8 * interval '1 millisecond', NULL,
           now() + ($4::float8 + $5::float8) * interval '1 millisecond', $6, now(), $7::text
    WHERE NOT EXISTS (SELECT 1 FROM done)
    ON CONFLICT (key) DO UPDATE SET
        state = 'running', fingerprint = EXCLUDED.fingerprint, token = EXCLUDED.token,
        tool = EXCLUDED.tool, changed_at = EXCLUDED.changed_at,
        about = CASE WHEN r.state = 'approved' AND r.expires_at > now() THEN r.about
                     ELSE EXCLUDED.about END,
        lease_until = EXCLUDED.lease_until, payload = NULL, expires_at = EXCLUDED.expires_at,
        attempt = CASE WHEN r.state = 'running' AND r.token = EXCLUDED.token THEN r.attempt
                       WHEN r.expires_at <= now() THEN 0
                       WHEN r.state = 'approved' THEN r.attempt
                       ELSE r.attempt + 1 END
    WHERE r.expires_at <= now() OR r.state = 'released'
       OR (r.state = 'running' AND (r.lease_until <= now() OR r.token = EXCLUDED.token))
       OR (r.state = 'approved' AND r.fingerprint = EXCLUDED.fingerprint)
    RETURNING r.attempt, (
        SELECT p.state = 'running' AND p.lease_until <= now() AND p.token <> $3
        FROM {table} p WHERE p.key = $1 AND p.expires_at > now()
    ) AS lapsed, (
        SELECT p.state = 'approved'
        FROM {table} p WHERE p.key = $1 AND p.expires_at > now()
    ) AS approved
)
SELECT 'acquired'::text, NULL::bytea, attempt,
       CASE WHEN coalesce(approved, false) THEN 'approved' END, coalesce(lapsed, false),
       NULL::bigint
FROM taken
UNION ALL
SELECT state, fingerprint, attempt, payload, lease_live, age_ms FROM done
UNION ALL
SELECT state, fingerprint, attempt, payload, lease_until > now(),
       (extract(epoch FROM now() - changed_at) * 1000)::bigint FROM {table}
WHERE key = $1 AND expires_at > now()
  AND NOT EXISTS (SELECT 1 FROM taken) AND NOT EXISTS (SELECT 1 FROM done)
