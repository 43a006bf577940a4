-- break.lua: KEYS = [lock]; ARGV = [channel, retention_ms]
-- Frees the lock whoever holds it (see acquire.lua for the layout): the
-- holding becomes a tombstone that keeps its fence, so the next holding's is
-- greater, and keeps the broken owner after an empty call id
-- ("0:<fence>::<owner>"), so that the owner's Extend and Release answer
-- "another owner holds it" rather than "expired". The tombstone lives for
-- the longer of the retention and what the holding had left, so it outlives
-- the broken owner's last renewal. Publishes on the channel as a release
-- does. Returns {1, owner, holds, pttl, fence} for a holding ended, {0} for
-- a free lock (nothing changed), {-1} when the key held a value that is not
-- a lock (of any type) and was deleted.
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  return {0}
end
local v = t == 'string' and redis.call('GET', KEYS[1])
local holds, fence, a, b, c
if v then
  holds, fence, a, b, c = parse(v)
end
if not holds then
  redis.call('DEL', KEYS[1])
  return {-1}
end
if holds == 0 then
  return {0}
end
local pttl = redis.call('PTTL', KEYS[1])
local owner = string.sub(v, c + 1)
redis.call('SET', KEYS[1], '0' .. string.sub(v, a, b) .. ':' .. owner, 'PX', math.max(pttl, tonumber(ARGV[2])))
redis.call('PUBLISH', ARGV[1], 'released')
return {1, owner, holds, pttl, string.sub(v, a + 1, b - 1)}
