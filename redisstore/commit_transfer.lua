-- commit_transfer.lua: KEYS = [lock, fence, resource, read?];
-- ARGV = [from, to, ttl_ms, value]
-- transfer.lua with a write: if ARGV[1] holds the lock exactly once, SET
-- KEYS[3] to ARGV[4], then make ARGV[2] the holder as a new holding (new
-- fence, one hold, fresh expiry). Returns {1, fence} on success, with GET
-- KEYS[4] after the write appended when KEYS[4] is given; {0} if nobody
-- holds the lock, {-1} if another owner does, {-2} if ARGV[1] holds it more
-- than once (all three write and change nothing). A WRONGTYPE KEYS[4] fails
-- before any write.
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
if KEYS[4] and KEYS[4] ~= KEYS[3] then
  redis.call('GET', KEYS[4])
end
redis.call('SET', KEYS[3], ARGV[4])
local fence = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'holds', 1, 'fence', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if KEYS[4] then
  return {1, fence, redis.call('GET', KEYS[4])}
end
return {1, fence}
