-- rw_extend.lua: KEYS = [hash, expiries]; ARGV = [token, ttl_ms, retention_ms]
-- Sets the expiry of ARGV[1]'s holding (see rw.lua) to ttl from now,
-- shorter or longer, leaving every other holding's as it was. Returns
-- {1, fence, readers, mode}, or {0} if the token holds nothing (never
-- creating a holding).
local now = clock()
local left = prune(KEYS[1], KEYS[2], now)
local st = redis.call('HMGET', KEYS[1], 'mode', 'h:' .. ARGV[1])
if not st[2] then
  return {0}
end
redis.call('ZADD', KEYS[2], num(now + tonumber(ARGV[2])), ARGV[1])
settle(KEYS[1], KEYS[2], now, tonumber(ARGV[3]))
local readers = 0
if st[1] == 'r' then
  readers = left
end
return {1, tonumber(st[2]), readers, code(st[1])}
