-- release.lua: KEYS = [lock]; ARGV = [token, channel]
-- Removes one hold of ARGV[1]; at zero deletes the lock and publishes on the
-- lock's channel so that waiters wake. Returns the holds left (>= 0), -1 if
-- nobody holds the lock, -2 if another owner does (changing nothing).
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds')
if not v[1] then
  return -1
end
if v[1] ~= ARGV[1] then
  return -2
end
local holds = tonumber(v[2]) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], 'holds', holds)
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
