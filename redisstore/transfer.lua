-- transfer.lua: KEYS = [lock, fence, resource...]; ARGV = [from, to, ttl_ms, value?]
-- (The lock is "<holds>:<owner>" and the fence counter is the holding's
-- fence: see acquire.lua.)
-- Hands the lock from ARGV[1] (holding it exactly once) to ARGV[2] as a new
-- holding: new owner, one hold, a new fence, a fresh expiry. No release is
-- published: the lock is never free. Without ARGV[4], KEYS[3] is an optional
-- resource to read (WithRead). With ARGV[4] (Lease.Commit), KEYS[3] is SET to
-- it and KEYS[4] is the optional resource to read.
-- Returns {1, fence} on success, with the read resource's value appended
-- (nil if missing) when there is one; {0} if nobody holds the lock, {-1} if
-- another owner does, {-2} if ARGV[1] holds it more than once (all three
-- write and change nothing). The read happens before any write, so a
-- WRONGTYPE error changes nothing.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
if v ~= '1:' .. ARGV[1] then
  local i = string.find(v, ':', 1, true)
  if i and tonumber(string.sub(v, 1, i - 1)) and string.sub(v, i + 1) == ARGV[1] then
    return {-2}
  end
  return {-1}
end
local write = ARGV[4] ~= nil
local read = KEYS[3]
if write then
  read = KEYS[4]
end
local val = false
if read then
  val = redis.call('GET', read)
end
if write then
  redis.call('SET', KEYS[3], ARGV[4])
  if read == KEYS[3] then
    val = ARGV[4]
  end
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], '1:' .. ARGV[2], 'PX', ARGV[3])
if read then
  return {1, fence, val}
end
return {1, fence}
