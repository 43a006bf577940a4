-- sem_acquire.lua: KEYS = [hash, expiries]; ARGV = [token, n, k, ttl_ms, retention_ms]
-- Gives ARGV[1] k of the semaphore's permits (see sem.lua for the layout)
-- if k are free, storing n as the limit. A new holding's fence is
-- max(last fence + 1, server TIME in µs), as for a lock.
-- Returns {1, fence, used} when granted; for a token that already holds
-- the semaphore with k permits the same, with its fence, after setting its
-- expiry to the later of the current one and ttl from now (so that a
-- resent command is harmless). Refusals change nothing but the pruning of
-- expired holdings: {0, used, limit, ms until the earliest expiry} when
-- fewer than k are free; {-1, limit} when permits are out under another
-- limit; {-2, k held} when the token holds another number of permits.
local now, us = clock()
local tok, n, k, ttl, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local used = prune(KEYS[1], KEYS[2], now)
local st = redis.call('HMGET', KEYS[1], 'n', 'fence', 'h:' .. tok)
local limit = tonumber(st[1])
if limit and limit ~= n and redis.call('ZCARD', KEYS[2]) > 0 then
  return {-1, limit}
end
if st[3] then
  local held, fence = holding(st[3])
  if held ~= k then
    return {-2, held}
  end
  if (tonumber(redis.call('ZSCORE', KEYS[2], tok)) or 0) < now + ttl then
    redis.call('ZADD', KEYS[2], num(now + ttl), tok)
    settle(KEYS[1], KEYS[2], now, keep)
  end
  return {1, fence, used}
end
if used + k > n then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local left = -1
  if #first > 0 then
    left = tonumber(first[2]) - now
  end
  return {0, used, limit or n, left}
end
local fence = math.max((tonumber(st[2]) or 0) + 1, us)
used = used + k
redis.call('HSET', KEYS[1], 'n', num(n), 'fence', num(fence), 'used', num(used), 'h:' .. tok, num(k) .. ':' .. num(fence))
redis.call('ZADD', KEYS[2], num(now + ttl), tok)
settle(KEYS[1], KEYS[2], now, keep)
return {1, fence, used}
