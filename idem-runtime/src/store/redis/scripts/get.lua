-- GET: what a key holds.
-- KEYS[1]. Returns nil | {'running', fp, attempt} | {'done', fp, result} |
-- {'failed', fp, error} | {'unknown', fp, reason, attempt, age} |
-- {'awaiting', fp, request, age} | {'approved', fp, ''}; a released record
-- reads as nil.
local rec = load(KEYS[1])
if not rec or rec.state == 'released' then return nil end
return found(KEYS[1], rec)
