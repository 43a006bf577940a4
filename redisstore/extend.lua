-- extend.lua: KEYS = [lock]; ARGV = [token, ttl_ms]
-- Returns {1, fence, holds} after setting the expiry to ttl (longer or
-- shorter: the store follows the latest Extend) if ARGV[1] holds the lock
-- (see acquire.lua for the layout); {0} if nobody holds it (no key or a
-- tombstone); {-1} if another owner does. Never creates it, and leaves the
-- call id alone so that a replayed release is still recognised.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
local a = string.find(v, ':', 1, true)
local b = a and string.find(v, ':', a + 1, true)
local c = b and string.find(v, ':', b + 1, true)
local holds = c and tonumber(string.sub(v, 1, a - 1))
local fence = c and tonumber(string.sub(v, a + 1, b - 1))
if not holds or not fence then
  return redis.error_reply('NOTALOCK the key holds a value that is not a dlock lock')
end
if holds == 0 then
  return {0}
end
if string.sub(v, c + 1) ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence, holds}
