-- release.lua: KEYS = [lock]; ARGV = [token, channel]
-- Removes one hold of ARGV[1]; at zero deletes the lock and publishes on the
-- lock's channel so that waiters wake. Returns the holds left (>= 0), -1 if
-- nobody holds the lock, -2 if another owner does (changing nothing).
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return -1
end
if owner ~= ARGV[1] then
  return -2
end
local holds = redis.call('HINCRBY', KEYS[1], 'holds', -1)
if holds > 0 then
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
