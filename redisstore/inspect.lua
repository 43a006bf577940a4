-- inspect.lua: KEYS = [lock]; ARGV = []
-- Returns {owner or '', holds or 0, pttl, last fence or 0}; changes nothing.
-- The lock is "<holds>:<fence>:<call id>:<owner>", a tombstone has holds 0
-- (see acquire.lua); a value that is not a lock is an error (NOTALOCK).
local v = redis.call('GET', KEYS[1])
if not v then
  return {'', 0, -2, 0}
end
local holds, fence, a, b, c = parse(v)
if not holds then
  return notalock()
end
local pttl = redis.call('PTTL', KEYS[1])
if holds == 0 then
  return {'', 0, pttl, fence}
end
return {string.sub(v, c + 1), holds, pttl, fence}
