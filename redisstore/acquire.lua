-- acquire.lua: KEYS = [lock, fence, resource?]; ARGV = [token, ttl_ms]
-- The lock is a string "<holds>:<owner>" with an expiry. fence is a counter
-- that outlives the lock and is incremented by every new holding (here and
-- in transfer.lua) and by nothing else, so while the lock is held the counter
-- is its holding's fence.
-- Returns the fence alone (an integer >= 1) when ARGV[1] took the lock as a
-- first hold, {1, fence, holds} when it re-entered, {0, pttl} when another
-- owner holds it (and changes nothing then). The free-lock path is two
-- commands and a bare integer: each command and each reply table a script
-- makes costs Redis more than the command itself.
-- With KEYS[3] (WithRead), a granted reply is {1, fence, holds, GET KEYS[3]}
-- (nil if missing); it is read before any write, so a WRONGTYPE error
-- changes nothing.
local val = false
if KEYS[3] then
  val = redis.call('GET', KEYS[3])
end
local old = redis.call('SET', KEYS[1], '1:' .. ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if not old then
  local fence = redis.call('INCR', KEYS[2])
  if KEYS[3] then
    return {1, fence, 1, val}
  end
  return fence
end
local i = string.find(old, ':', 1, true)
local holds = i and tonumber(string.sub(old, 1, i - 1))
if not holds or string.sub(old, i + 1) ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
holds = holds + 1
redis.call('SET', KEYS[1], holds .. ':' .. ARGV[1], 'PX', ARGV[2])
local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
if KEYS[3] then
  return {1, fence, holds, val}
end
return {1, fence, holds}
