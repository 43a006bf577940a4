-- extend.lua: KEYS = [lock, fence]; ARGV = [token, ttl_ms]
-- Returns {1, fence, holds} after resetting the expiry if ARGV[1] holds the
-- lock (see acquire.lua for the layout: the fence counter is the holding's
-- fence); {0} if nobody holds it; {-1} if another owner does. Never creates
-- it.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
local i = string.find(v, ':', 1, true)
local holds = i and tonumber(string.sub(v, 1, i - 1))
if not holds or string.sub(v, i + 1) ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tonumber(redis.call('GET', KEYS[2]) or '0'), holds}
