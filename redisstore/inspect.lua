-- inspect.lua: KEYS = [lock]; ARGV = []
-- Returns {owner or '', holds or 0, pttl, last fence or 0}; changes nothing.
-- The lock is "<holds>:<fence>:<call id>:<owner>", a tombstone has holds 0
-- (see acquire.lua); a value that is not a lock is an error (NOTALOCK).
local v = redis.call('GET', KEYS[1])
if not v then
  return {'', 0, -2, 0}
end
local a = string.find(v, ':', 1, true)
local b = a and string.find(v, ':', a + 1, true)
local c = b and string.find(v, ':', b + 1, true)
local holds = c and tonumber(string.sub(v, 1, a - 1))
local fence = c and tonumber(string.sub(v, a + 1, b - 1))
if not holds or not fence then
  return redis.error_reply('NOTALOCK the key holds a value that is not a dlock lock')
end
local pttl = redis.call('PTTL', KEYS[1])
if holds == 0 then
  return {'', 0, pttl, fence}
end
return {string.sub(v, c + 1), holds, pttl, fence}
