-- raise_fence.lua: KEYS = [lock, fence]; ARGV = [token, fence]
-- In redisstore's layout the counter of a held lock is its holding's fence.
-- If ARGV[1] holds the lock ("<holds>:<owner>"; its own grant here is at most
-- ARGV[2], the maximum over the granting nodes), raises the counter to
-- ARGV[2], which records ARGV[2] as its fence (re-entry and extend then
-- report it), and returns 1. If the lock is free, raises the counter all the
-- same (harmless) and returns 0. If another owner holds it, changes nothing
-- and returns 0: raising would change that holding's fence, and a stale
-- raise could then lift a later holding above the holdings after it. Not
-- needed for monotonicity either: a raise that succeeds has a majority of
-- confirming nodes, and every later majority shares one of them.
local v = redis.call('GET', KEYS[1])
local mine = false
if v then
  local i = string.find(v, ':', 1, true)
  mine = i and tonumber(string.sub(v, 1, i - 1)) and string.sub(v, i + 1) == ARGV[1]
  if not mine then
    return 0
  end
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
if mine then
  return 1
end
return 0
