-- INSPECT: a record as an operator sees it, changing nothing.
-- KEYS[1]; ARGV: '1' to answer the payload ('0' not to).
-- Returns nil | {state, fp, attempt, token, tool, age ms, lease ms, pttl,
-- payload, about}, with age -1 when the record does not say (format 1), lease
-- the ms a running record's lease has left (negative once lapsed, -1 for
-- other states), payload '' when not asked for.
local rec = load(KEYS[1])
if not rec then return nil end
local pttl = redis.call('PTTL', KEYS[1])
local age = rec.life and math.max(0, rec.life - pttl) or -1
local lease = -1
if rec.state == 'running' then lease = pttl - rec.retention end
local payload = ''
if ARGV[1] == '1' then payload = rec.payload end
return {rec.state, rec.fp, tostring(rec.attempt or 0), rec.token, rec.tool, tostring(age), tostring(lease),
  tostring(pttl), payload, rec.about}
