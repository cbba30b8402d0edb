-- Shared by every script: reading a record with its fields checked, and
-- writing one with its expiry.
-- Returns the record, nil when absent, or raises 'corrupt: ..'. A key of
-- another type fails the GET (WRONGTYPE).
local function load(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local v, state, fp, attempt, token, payload =
    string.match(raw, '^(%d+)|(%l+)|(%x*)|(%d*)|(%x*)|(.*)$')
  if not v then return error('corrupt: the value is not an idem record') end
  if v ~= '1' then return error('corrupt: unknown record format version ' .. v) end
  if #fp ~= 64 then return error('corrupt: bad fingerprint') end
  local rec = { state = state, fp = fp, attempt = tonumber(attempt), token = token, payload = payload }
  if state == 'running' then
    if not rec.attempt or #token ~= 32 then return error('corrupt: incomplete running record') end
  elseif state == 'released' then
    if not rec.attempt then return error('corrupt: incomplete released record') end
  elseif state ~= 'done' and state ~= 'failed' then
    return error('corrupt: unknown state ' .. state)
  end
  return rec
end
local function store(key, state, fp, attempt, token, payload, px)
  redis.call('SET', key, '1|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. token .. '|'
    .. payload, 'PX', string.format('%d', px))
end
