-- SETTLE: done, failed, released, unknown, awaiting, approved and renew,
-- on the holder's token; the resolution of an unknown record (to done,
-- failed or released) with the token that made it unknown; a person's
-- decision on an awaiting record (approved, failed: refused, or released)
-- with the token that made it awaiting, and its revocation (approved to
-- awaiting again) with that token still (`Outcome::settles`).
-- KEYS[1]; ARGV: token, op ('done' | 'failed' | 'released' | 'unknown' |
-- 'awaiting' | 'approved' | 'renew'), the payload (result, error, reason,
-- request, the approval's about, or lease ms) or the whole settled
-- record, ms to keep the record (unused by renew, which keeps the
-- record's retention after the new lease), the format to write ('1' to
-- '4'), and the length of the settled
-- record's head before its payload in ARGV[3] ('0' when ARGV[3] is the
-- payload alone: the store does not know the record its claim wrote,
-- after a renewal or for a token from elsewhere).
-- Returns 'ok' or 'lost'.
local raw = redis.call('GET', KEYS[1])
-- The usual case: the key still holds the running record of this token,
-- so the one the claim wrote (a renewal, which changes its life, makes
-- the store send the payload alone), and ARGV[3] is the record that
-- settles it. Checked without making a string: each would be garbage for
-- Lua to collect, and a settle is most of the server's work per call
-- (BENCHMARKS.md).
local head = tonumber(ARGV[6])
if head ~= 0 and raw and string.sub(raw, 2, 10) == '|running|' and string.sub(raw, -33, -2) == ARGV[1]
  and string.byte(raw, -34) == 124 and string.byte(raw, -1) == 124 then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return 'ok'
end
local op = ARGV[2]
local payload = head == 0 and ARGV[3] or string.sub(ARGV[3], head + 1)
-- Anything else: a renewal, format 1, a repeat, lost, or corrupt.
local rec = load(KEYS[1])
local repeated = op == 'released' or (op == 'approved' and rec and rec.about == payload)
  or (op ~= 'approved' and rec and rec.payload == payload)
if rec and rec.token == ARGV[1] and rec.state == op and repeated then
  -- This very settle took effect already; its reply was lost. Written
  -- again so that a WAIT after it covers it.
  redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
  return 'ok'
end
local decides = rec and ((rec.state == 'unknown' and (op == 'done' or op == 'failed' or op == 'released'))
  or (rec.state == 'awaiting' and (op == 'approved' or op == 'failed' or op == 'released'))
  or (rec.state == 'approved' and op == 'awaiting'))
if not rec or (rec.state ~= 'running' and not decides) or rec.token ~= ARGV[1] then return 'lost' end
if op == 'renew' then
  -- The claim's age carries over: life counts from the claim.
  local px = tonumber(payload) + rec.retention
  local age = rec.life and math.max(0, rec.life - redis.call('PTTL', KEYS[1])) or 0
  store(KEYS[1], ARGV[5], 'running', rec.fp, rec.attempt, rec.tool, age + px, rec.token, '', px, rec.about,
    rec.retention)
elseif op == 'approved' then
  -- The approval's about replaces the record's; it has no payload.
  store(KEYS[1], ARGV[5], op, rec.fp, rec.attempt, rec.tool, tonumber(ARGV[4]), rec.token, '',
    tonumber(ARGV[4]), payload, rec.retention)
else
  store(KEYS[1], ARGV[5], op, rec.fp, rec.attempt, rec.tool, tonumber(ARGV[4]), rec.token, payload,
    tonumber(ARGV[4]), rec.about, rec.retention)
end
return 'ok'
