-- SETTLE: complete, fail, release, unknown and renew, on the holder's
-- token; and the resolution of an unknown record (to done, failed or
-- released) with the token that made it unknown.
-- KEYS[1]; ARGV: token, op ('done' | 'failed' | 'released' | 'unknown' |
-- 'renew'),
-- payload (result, error, or lease ms), ms to keep the record (for renew:
-- the retention after the lease), the format to write ('1' or '2'), the
-- running record this store's claim wrote, byte for byte, and the record
-- that settles it without its payload ('' and '' when the store does not
-- know them: after a renewal, or a token from elsewhere).
-- Returns 'ok' or 'lost'.
local raw = redis.call('GET', KEYS[1])
-- The usual case: the key still holds the very record the claim wrote.
-- An exact comparison is the cheapest check there is (a settle is most of
-- the server's work per call; BENCHMARKS.md).
if raw and ARGV[6] ~= '' and raw == ARGV[6] then
  redis.call('SET', KEYS[1], ARGV[7] .. ARGV[3], 'PX', ARGV[4])
  return 'ok'
end
-- Next, a running record of format 2 held with this token
-- ('2|running|' fp '|' attempt '|' tool '|' life '|' token '|'), settled
-- without parsing it into a table.
local op = ARGV[2]
local held = op ~= 'renew' and ARGV[5] == '2' and raw and string.sub(raw, 1, 10) == '2|running|'
  and string.sub(raw, -34) == '|' .. ARGV[1] .. '|' and string.sub(raw, 11, -35)
-- head = fp '|' attempt '|' tool '|', each checked; the life is replaced.
local head = held and string.match(held, '^(%x+|%d+|[^|]*|)%d+$')
if head and string.sub(head, 65, 65) == '|' then
  -- A settled record keeps the token that settled it.
  redis.call('SET', KEYS[1], '2|' .. op .. '|' .. head .. ARGV[4] .. '|' .. ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[4])
  return 'ok'
end
-- Anything else: a renewal, format 1, a repeat, lost, or corrupt.
local rec = load(KEYS[1])
if rec and rec.token == ARGV[1] and rec.state == op and (op == 'released' or rec.payload == ARGV[3]) then
  -- This very settle took effect already; its reply was lost. Written
  -- again so that a WAIT after it covers it.
  redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
  return 'ok'
end
local resolving = rec and rec.state == 'unknown' and op ~= 'unknown' and op ~= 'renew'
if not rec or (rec.state ~= 'running' and not resolving) or rec.token ~= ARGV[1] then return 'lost' end
if op == 'renew' then
  -- The claim's age carries over: life counts from the claim.
  local px = tonumber(ARGV[3]) + tonumber(ARGV[4])
  local age = rec.life and math.max(0, rec.life - redis.call('PTTL', KEYS[1])) or 0
  store(KEYS[1], ARGV[5], 'running', rec.fp, rec.attempt, rec.tool, age + px, rec.token, '', px)
else
  store(KEYS[1], ARGV[5], op, rec.fp, rec.attempt, rec.tool, tonumber(ARGV[4]), rec.token, ARGV[3],
    tonumber(ARGV[4]))
end
return 'ok'
