-- inspect.lua: KEYS = [lock, meta?]; ARGV = []
-- Returns {owner or '', holds or 0, pttl, last fence or 0, meta or ''};
-- changes nothing. The lock is "<holds>:<fence>:<call id>:<owner>", a
-- tombstone has holds 0 (see acquire.lua); a value that is not a lock is an
-- error (NOTALOCK). meta is the holder metadata the meta key keeps for the
-- current holding ("<fence>:<meta>", see acquire.lua), '' for another fence.
local v = redis.call('GET', KEYS[1])
if not v then
  return {'', 0, -2, 0, ''}
end
local holds, fence, a, b, c = parse(v)
if not holds then
  return notalock()
end
local pttl = redis.call('PTTL', KEYS[1])
if holds == 0 then
  return {'', 0, pttl, fence, ''}
end
local meta = ''
if KEYS[2] then
  local m = redis.call('GET', KEYS[2])
  local f = string.sub(v, a + 1, b - 1) .. ':'
  if m and string.sub(m, 1, #f) == f then
    meta = string.sub(m, #f + 1)
  end
end
return {string.sub(v, c + 1), holds, pttl, fence, meta}
