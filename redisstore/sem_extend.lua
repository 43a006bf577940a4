-- sem_extend.lua: KEYS = [hash, expiries]; ARGV = [token, ttl_ms, retention_ms]
-- Sets the expiry of ARGV[1]'s holding (see sem.lua) to ttl from now,
-- shorter or longer, leaving every other holding's as it was. Returns
-- {1, fence, k, used}, or {0} if the token holds no permit (never creating
-- one).
local now = clock()
local used = prune(KEYS[1], KEYS[2], now)
local v = redis.call('HGET', KEYS[1], 'h:' .. ARGV[1])
if not v then
  return {0}
end
local k, fence = holding(v)
redis.call('ZADD', KEYS[2], num(now + tonumber(ARGV[2])), ARGV[1])
settle(KEYS[1], KEYS[2], now, tonumber(ARGV[3]))
return {1, fence, k, used}
