-- raise_fence.lua: KEYS = [lock, fence]; ARGV = [token, fence]
-- Raises the fence counter to at least ARGV[2]. In redisstore's layout the
-- counter of a held lock is its holding's fence, so for ARGV[1]'s holding
-- (whose own grant on this node is at most ARGV[2], the maximum over the
-- granting nodes) this records ARGV[2] as its fence: re-entry and extend
-- then report it. Returns 1 if ARGV[1] holds the lock ("<holds>:<owner>"),
-- 0 otherwise (the counter is raised either way: raising never hurts
-- monotonicity).
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local i = string.find(v, ':', 1, true)
if i and tonumber(string.sub(v, 1, i - 1)) and string.sub(v, i + 1) == ARGV[1] then
  return 1
end
return 0
