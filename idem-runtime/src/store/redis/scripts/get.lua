-- GET: what a key holds.
-- KEYS[1]. Returns nil | {'running', fp, attempt} | {'done', fp, result} |
-- {'failed', fp, error} | {'unknown', fp, reason, attempt, age}; a
-- released record reads as nil.
local rec = load(KEYS[1])
if not rec or rec.state == 'released' then return nil end
if rec.state == 'unknown' then return unknown(KEYS[1], rec) end
if rec.state == 'running' then return {'running', rec.fp, tostring(rec.attempt)} end
return {rec.state, rec.fp, rec.payload}
