-- commit_release.lua: KEYS = [lock, resource]; ARGV = [token, channel, value]
-- release.lua with a write: if ARGV[1] holds the lock, SET KEYS[2] to
-- ARGV[3] (replacing whatever it held), then remove one hold, deleting the
-- lock and publishing at zero. Returns the holds left (>= 0); -1 if nobody
-- holds the lock, -2 if another owner does (writing and changing nothing).
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds')
if not v[1] then
  return -1
end
if v[1] ~= ARGV[1] then
  return -2
end
redis.call('SET', KEYS[2], ARGV[3])
local holds = tonumber(v[2]) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], 'holds', holds)
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
