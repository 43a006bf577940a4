-- acquire.lua: KEYS = [lock, fence]; ARGV = [token, ttl_ms]
-- The lock is a hash {owner, holds, fence} with an expiry; fence is a counter
-- that outlives the lock so every new holding gets a larger number.
-- Returns {1, fence, holds} when ARGV[1] holds the lock after the call,
-- {0, pttl} when another owner holds it (and changes nothing then).
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'holds', 1, 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
if owner == ARGV[1] then
  local holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), holds}
end
return {0, redis.call('PTTL', KEYS[1])}
