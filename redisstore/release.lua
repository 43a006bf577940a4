-- release.lua: KEYS = [lock, resource?]; ARGV = [token, channel, value?]
-- Removes one hold of ARGV[1]; at zero deletes the lock and publishes on the
-- lock's channel so that waiters wake. With KEYS[2] (Lease.Commit), first
-- SETs it to ARGV[3] (replacing whatever it held), only for the holder.
-- Returns the holds left (>= 0), -1 if nobody holds the lock, -2 if another
-- owner does (writing and changing nothing).
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds')
if not v[1] then
  return -1
end
if v[1] ~= ARGV[1] then
  return -2
end
if KEYS[2] then
  redis.call('SET', KEYS[2], ARGV[3])
end
local holds = tonumber(v[2]) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], 'holds', holds)
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
