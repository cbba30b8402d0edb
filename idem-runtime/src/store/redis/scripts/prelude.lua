-- Shared by every script: reading a record of any format version with its
-- fields checked, and writing one of the format the store writes with its
-- expiry.
-- Format 1: 1|state|fp|attempt|token|payload
-- Format 2: 2|state|fp|attempt|tool|life|token|payload, where life is the
-- ms from when the record entered its state to its expiry (so its age is
-- life - PTTL, on the server's clock).
-- Format 3: 3|state|fp|attempt|tool|life|n|about|token|payload, where about
-- (n bytes, any text) says what the operation is, for operators.
-- Format 4: 4|state|fp|attempt|tool|life|retention|n|about|token|payload,
-- where retention is the ms a running record outlives its lease (its
-- claim's, kept by a renewal and a settle); a record of an earlier format
-- is read as having CLAIM_RETENTION, the one its writer gave every claim.
-- Returns the record, nil when absent, or raises 'corrupt: ..'. A key of
-- another type fails the GET (WRONGTYPE).
-- States: running, released, done, failed, unknown (idem 0.3: readers
-- before it refuse an unknown record as corrupt, never misread it),
-- awaiting and approved (idem 0.4, likewise refused by earlier readers).
-- An awaiting record's payload is what was asked; an approved one has none
-- (its about says who approved).
local CLAIM_RETENTION = @CLAIM_RETENTION_MS@
local function load(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local v = string.match(raw, '^(%d+)|')
  local state, fp, attempt, tool, life, retention, token, payload, about
  if v == '1' then
    state, fp, attempt, token, payload = string.match(raw, '^1|(%l+)|(%x*)|(%d*)|(%x*)|(.*)$')
  elseif v == '2' then
    state, fp, attempt, tool, life, token, payload =
      string.match(raw, '^2|(%l+)|(%x*)|(%d*)|([^|]*)|(%d*)|(%x*)|(.*)$')
  elseif v == '3' or v == '4' then
    local n, rest
    if v == '3' then
      state, fp, attempt, tool, life, n, rest =
        string.match(raw, '^3|(%l+)|(%x*)|(%d*)|([^|]*)|(%d*)|(%d+)|(.*)$')
    else
      state, fp, attempt, tool, life, retention, n, rest =
        string.match(raw, '^4|(%l+)|(%x*)|(%d*)|([^|]*)|(%d*)|(%d+)|(%d+)|(.*)$')
    end
    if state then
      about = string.sub(rest, 1, tonumber(n))
      token, payload = string.match(string.sub(rest, tonumber(n) + 1), '^|(%x*)|(.*)$')
      if #about ~= tonumber(n) or not token then state = nil end
    end
  elseif v then
    return error('corrupt: unknown record format version ' .. v)
  end
  if not state then return error('corrupt: the value is not an idem record') end
  -- 64 digits, then (format 2 and later) 16 per field tag, at most 64 tags
  -- (MAX_FIELD_TAGS in key.rs).
  if #fp ~= 64 and (v == '1' or #fp < 64 or (#fp - 64) % 16 ~= 0 or #fp > 64 + 16 * 64) then
    return error('corrupt: bad fingerprint')
  end
  local rec = { state = state, fp = fp, attempt = tonumber(attempt), token = token, payload = payload,
    tool = tool or '', life = tonumber(life), about = about or '',
    retention = tonumber(retention) or CLAIM_RETENTION }
  if state == 'running' then
    if not rec.attempt or #token ~= 32 then return error('corrupt: incomplete running record') end
  elseif state == 'released' then
    if not rec.attempt then return error('corrupt: incomplete released record') end
  elseif state == 'unknown' or state == 'awaiting' then
    if not rec.attempt or #token ~= 32 then return error('corrupt: incomplete ' .. state .. ' record') end
  elseif state == 'approved' then
    if not rec.attempt then return error('corrupt: incomplete approved record') end
  elseif state ~= 'done' and state ~= 'failed' then
    return error('corrupt: unknown state ' .. state)
  end
  return rec
end
-- Writes a record of format v ('1' to '4') that expires in px ms, life ms
-- after it entered its state, its claim's retention ms (format 1 keeps
-- neither life nor tool, format 2 no about, 3 no retention).
local function store(key, v, state, fp, attempt, tool, life, token, payload, px, about, retention)
  local line
  if v == '1' then
    line = '1|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. token .. '|' .. payload
  elseif v == '2' then
    line = '2|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. tool
      .. '|' .. string.format('%d', life) .. '|' .. token .. '|' .. payload
  elseif v == '3' then
    line = '3|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. tool
      .. '|' .. string.format('%d', life) .. '|' .. string.format('%d', #about) .. '|' .. about
      .. '|' .. token .. '|' .. payload
  else
    line = '4|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. tool
      .. '|' .. string.format('%d', life) .. '|' .. string.format('%d', retention)
      .. '|' .. string.format('%d', #about) .. '|' .. about .. '|' .. token .. '|' .. payload
  end
  redis.call('SET', key, line, 'PX', string.format('%d', px))
end
-- The answer to a claim or read that finds an unknown record: its
-- fingerprint, reason, attempt and age (ms; 0 when the record does not
-- say, in format 1).
local function unknown(key, rec)
  local age = rec.life and math.max(0, rec.life - redis.call('PTTL', key)) or 0
  return {'unknown', rec.fp, rec.payload, tostring(rec.attempt), string.format('%d', age)}
end
-- The answer to a claim or read that finds a record it does not take: an
-- unknown one as above, an awaiting one with what was asked and its age
-- (ms), anything else as {state, fp, payload or attempt}.
local function found(key, rec)
  if rec.state == 'unknown' then return unknown(key, rec) end
  if rec.state == 'awaiting' then
    local age = rec.life and math.max(0, rec.life - redis.call('PTTL', key)) or 0
    return {'awaiting', rec.fp, rec.payload, string.format('%d', age)}
  end
  if rec.state == 'running' then return {'running', rec.fp, tostring(rec.attempt)} end
  return {rec.state, rec.fp, rec.payload}
end
