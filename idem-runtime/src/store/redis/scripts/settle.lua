-- SETTLE: complete, fail, release and renew, on the holder's token.
-- KEYS[1]; ARGV: token, op ('done' | 'failed' | 'released' | 'renew'),
-- payload (result, error, or lease ms), ms to keep the record (for renew:
-- the retention after the lease).
-- Returns 'ok' or 'lost'.
-- The usual case, the running record held with this token
-- ('1|running|' fp '|' attempt '|' token '|'), is settled without parsing
-- it into a table: a fifth of the server's work per call.
local raw = redis.call('GET', KEYS[1])
local held = raw and string.sub(raw, 1, 10) == '1|running|'
  and string.sub(raw, -34) == '|' .. ARGV[1] .. '|' and string.sub(raw, 11, -35)
if held and string.sub(held, 65, 65) == '|' and string.find(held, '^%x+|%d+$') then
  -- held = fp '|' attempt, both checked.
  local op = ARGV[2]
  if op == 'renew' then
    redis.call('SET', KEYS[1], raw, 'PX', string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4])))
  else
    -- A settled record keeps the token that settled it.
    redis.call('SET', KEYS[1], '1|' .. op .. '|' .. held .. '|' .. ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[4])
  end
  return 'ok'
end
-- Anything else: a repeat, lost, or corrupt.
local rec = load(KEYS[1])
local op = ARGV[2]
if rec and rec.token == ARGV[1] and rec.state == op and (op == 'released' or rec.payload == ARGV[3]) then
  -- This very settle took effect already; its reply was lost. Written
  -- again so that a WAIT after it covers it.
  redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
  return 'ok'
end
if not rec or rec.state ~= 'running' or rec.token ~= ARGV[1] then return 'lost' end
if op == 'renew' then
  store(KEYS[1], 'running', rec.fp, rec.attempt, rec.token, '', tonumber(ARGV[3]) + tonumber(ARGV[4]))
else
  store(KEYS[1], op, rec.fp, rec.attempt, rec.token, ARGV[3], tonumber(ARGV[4]))
end
return 'ok'
