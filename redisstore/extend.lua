-- extend.lua: KEYS = [lock]; ARGV = [token, ttl_ms]
-- Returns {1, fence, holds} after resetting the expiry if ARGV[1] holds the
-- lock; {0} if nobody holds it; {-1} if another owner does. Never creates it.
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'holds')
if not v[1] then
  return {0}
end
if v[1] ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tonumber(v[2]), tonumber(v[3])}
