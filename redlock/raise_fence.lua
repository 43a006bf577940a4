-- raise_fence.lua: KEYS = [lock, fence]; ARGV = [token, fence]
-- Raises the fence counter to at least ARGV[2] and, if ARGV[1] holds the
-- lock, records ARGV[2] as the holding's fence (so that re-entry and extend
-- report it). Returns 1 if ARGV[1] holds the lock, 0 otherwise (the counter
-- is raised either way: raising never hurts monotonicity).
local f = tonumber(ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < f then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
  return 1
end
return 0
