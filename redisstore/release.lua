-- release.lua: KEYS = [lock, resource?]; ARGV = [token, channel, value?]
-- Removes one hold of ARGV[1] (the lock is "<holds>:<owner>", see
-- acquire.lua); at zero deletes the lock and publishes on the lock's channel
-- so that waiters wake. With KEYS[2] (Lease.Commit), first SETs it to
-- ARGV[3] (replacing whatever it held), only for the holder.
-- Returns the holds left (>= 0), -1 if nobody holds the lock, -2 if another
-- owner does (writing and changing nothing).
local v = redis.call('GET', KEYS[1])
if not v then
  return -1
end
local holds = 0
if v ~= '1:' .. ARGV[1] then
  local i = string.find(v, ':', 1, true)
  local h = i and tonumber(string.sub(v, 1, i - 1))
  if not h or string.sub(v, i + 1) ~= ARGV[1] then
    return -2
  end
  holds = h - 1
end
if KEYS[2] then
  redis.call('SET', KEYS[2], ARGV[3])
end
if holds > 0 then
  redis.call('SET', KEYS[1], holds .. ':' .. ARGV[1], 'KEEPTTL')
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
