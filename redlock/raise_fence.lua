-- raise_fence.lua: KEYS = [lock, unused]; ARGV = [token, fence, retention_ms?]
-- In redisstore's layout the lock is "<holds>:<fence>:<call id>:<owner>" and
-- holds 0 is a tombstone keeping a free lock's last fence (see redisstore's
-- acquire.lua). If ARGV[1] holds the lock (its own grant here is at most
-- ARGV[2], the maximum over the granting nodes), raises the lock's fence to
-- ARGV[2], which re-entry and extend then report, and returns 1. If the lock
-- is free, raises the fence all the same (harmless: a tombstone, or a new
-- one that lasts ARGV[3] ms, default 30000, like any other) and returns 0.
-- If another owner holds it, changes nothing and returns 0: raising would
-- change that holding's fence, and a stale raise could then lift a later
-- holding above the holdings after it. Not needed for monotonicity either: a
-- raise that succeeds has a majority of confirming nodes, and every later
-- majority shares one of them.
local want = tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], '0:' .. ARGV[2] .. '::', 'PX', ARGV[3] or '30000')
  return 0
end
local a = string.find(v, ':', 1, true)
local b = a and string.find(v, ':', a + 1, true)
local c = b and string.find(v, ':', b + 1, true)
local holds = c and tonumber(string.sub(v, 1, a - 1))
local fence = c and tonumber(string.sub(v, a + 1, b - 1))
if not holds or not fence then
  return redis.error_reply('NOTALOCK the key holds a value that is not a dlock lock')
end
local mine = holds > 0 and string.sub(v, c + 1) == ARGV[1]
if holds > 0 and not mine then
  return 0
end
if fence < want then
  redis.call('SET', KEYS[1], string.sub(v, 1, a) .. ARGV[2] .. string.sub(v, b), 'KEEPTTL')
end
if mine then
  return 1
end
return 0
