-- CLAIM: the claim of a key that exists (a first claim is a plain SET NX).
-- KEYS[1]; ARGV: fingerprint, token, lease ms, the claim's retention ms
-- (how long its record outlives its lease: written in format 4, and
-- CLAIM_RETENTION when an earlier format is written), tool, the format to
-- write ('1' to '4'), about (format 3 and later).
-- Returns {'acquired', attempt} | {'acquired', attempt, 'lapsed'} (taken
-- over from a claim whose lease lapsed) | {'acquired', attempt,
-- 'approved'} (an approval of these very arguments used up: the new record
-- keeps the about it wrote) | {'running', fp, attempt} | {'done', fp,
-- result} | {'failed', fp, error} | {'unknown', fp, reason, attempt, age}
-- | {'awaiting', fp, request, age} | {'approved', fp, ''} (approved for
-- other arguments).
local rec = load(KEYS[1])
local attempt = 0
local lapsed = nil
local about = ARGV[7]
if rec then
  if rec.state == 'running' and rec.token == ARGV[2] then
    -- Our own claim, sent again after its reply was lost. Written again so
    -- that a WAIT after it covers it.
    redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
    return {'acquired', tostring(rec.attempt)}
  elseif rec.state == 'running' then
    -- The lease is live while more than the record's retention is left.
    if redis.call('PTTL', KEYS[1]) > rec.retention then return {'running', rec.fp, tostring(rec.attempt)} end
    attempt = rec.attempt + 1
    lapsed = 'lapsed'
  elseif rec.state == 'released' then
    attempt = rec.attempt + 1
  elseif rec.state == 'approved' and rec.fp == ARGV[1] then
    attempt = rec.attempt
    lapsed = 'approved'
    about = rec.about
  else
    return found(KEYS[1], rec)
  end
end
local retention = tonumber(ARGV[4])
local px = tonumber(ARGV[3]) + retention
store(KEYS[1], ARGV[6], 'running', ARGV[1], attempt, ARGV[5], px, ARGV[2], '', px, about, retention)
return {'acquired', string.format('%d', attempt), lapsed}
