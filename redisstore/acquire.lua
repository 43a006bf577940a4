-- acquire.lua: KEYS = [lock, fence, resource?]; ARGV = [token, ttl_ms]
-- The lock is a hash {owner, holds, fence} with an expiry; fence is a counter
-- that outlives the lock so every new holding gets a larger number.
-- Returns the fence alone (an integer >= 1) when ARGV[1] took the lock as a
-- first hold, {1, fence, holds} when it re-entered, {0, pttl} when another
-- owner holds it (and changes nothing then). The bare integer spares Redis a
-- Lua table and its conversion on the common path (~5% of a lock+unlock's
-- server instructions).
-- With KEYS[3] (WithRead), a granted reply also carries GET KEYS[3] as a
-- fourth element (nil if missing); it is read before any write, so a
-- WRONGTYPE error changes nothing.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
local val = false
if KEYS[3] then
  val = redis.call('GET', KEYS[3])
end
local fence, holds
if not owner then
  fence = redis.call('INCR', KEYS[2])
  holds = 1
  -- '1' as a string: a Lua number argument costs Redis a printf to format.
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'holds', '1', 'fence', fence)
else
  holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  fence = tonumber(redis.call('HGET', KEYS[1], 'fence'))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[3] then
  return {1, fence, holds, val}
end
if holds == 1 then
  return fence
end
return {1, fence, holds}
