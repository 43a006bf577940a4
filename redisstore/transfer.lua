-- transfer.lua: KEYS = [lock, fence, resource?]; ARGV = [from, to, ttl_ms]
-- Hands the lock from ARGV[1] (holding it exactly once) to ARGV[2] as a new
-- holding: new owner, one hold, a new fence, a fresh expiry. No release is
-- published: the lock is never free. Returns {1, fence} on success; {0} if
-- nobody holds it, {-1} if another owner does, {-2} if ARGV[1] holds it more
-- than once (all three change nothing). With KEYS[3] (WithRead), a success
-- also carries GET KEYS[3] (nil if missing), read before any write.
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds')
if not v[1] then
  return {0}
end
if v[1] ~= ARGV[1] then
  return {-1}
end
if tonumber(v[2]) ~= 1 then
  return {-2}
end
local val = false
if KEYS[3] then
  val = redis.call('GET', KEYS[3])
end
local fence = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'holds', 1, 'fence', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if KEYS[3] then
  return {1, fence, val}
end
return {1, fence}
