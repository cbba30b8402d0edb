-- A new running record under ?1 (fingerprint ?2, attempt ?3, token ?4,
-- lease until ?5, kept until ?6, of tool ?7, claimed at ?8, about ?9),
-- written over a claimable one; when ?10, the claim uses up an approval
-- and keeps the about the approval wrote (who approved, and when).
INSERT OR REPLACE INTO idem_records
    (key, state, fingerprint, attempt, token, lease_until, payload, expires_at, tool, changed_at, about)
VALUES (?1, 'running', ?2, ?3, ?4, ?5, NULL, ?6, ?7, ?8,
        CASE WHEN ?10 THEN (SELECT about FROM idem_records WHERE key = ?1) ELSE ?9 END)
