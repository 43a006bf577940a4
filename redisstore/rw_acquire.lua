-- rw_acquire.lua: KEYS = [hash, expiries]; ARGV = [token, 'r' or 'w', ttl_ms, retention_ms, mark_ms, channel]
-- Gives ARGV[1] a read or the write holding (see rw.lua for the layout).
-- A new holding's fence is max(last fence + 1, server TIME in µs), as for
-- a lock. Returns {1, fence, readers, mode} when granted; for a token that
-- already holds the key the same with its fence, after setting its expiry
-- to the later of the current one and ttl from now (a read by the writer
-- first downgrades it and publishes). {-1} for an upgrade (a reader asking
-- to write), changing nothing. Otherwise {0, mode held, readers, 1 if a
-- mark is live, ms until the first thing that refused it ends}: a refused
-- writer first sets the mark to itself for mark_ms; a refused reader
-- changes nothing but the pruning.
local now, us = clock()
local tok, want, ttl, keep = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local left = prune(KEYS[1], KEYS[2], now)
local st = redis.call('HMGET', KEYS[1], 'mode', 'fence', 'h:' .. tok, 'wait', 'waitexp')
local mode = st[1]
local function readers()
  if mode == 'r' then
    return left
  end
  return 0
end
if st[3] then
  if mode == 'r' and want == 'w' then
    return {-1}
  end
  if mode == 'w' and want == 'r' then
    mode = 'r'
    redis.call('HSET', KEYS[1], 'mode', 'r')
    redis.call('PUBLISH', ARGV[6], 'downgraded')
  end
  if (tonumber(redis.call('ZSCORE', KEYS[2], tok)) or 0) < now + ttl then
    redis.call('ZADD', KEYS[2], num(now + ttl), tok)
    settle(KEYS[1], KEYS[2], now, keep)
  end
  return {1, tonumber(st[3]), readers(), code(mode)}
end
local function taken(markOnly, marked)
  local first = tonumber(redis.call('HGET', KEYS[1], 'waitexp')) or now - 1
  if not markOnly then
    first = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2])
  end
  return {0, code(mode), readers(), marked, first - now}
end
if want == 'r' and mode == 'w' then
  return taken(false, st[4] and 1 or 0)
elseif want == 'r' and st[4] then
  return taken(true, 1)
elseif want == 'w' and left > 0 then
  redis.call('HSET', KEYS[1], 'wait', tok, 'waitexp', num(now + tonumber(ARGV[5])))
  settle(KEYS[1], KEYS[2], now, keep)
  return taken(false, 1)
elseif want == 'w' and st[4] == tok then
  redis.call('HDEL', KEYS[1], 'wait', 'waitexp')
end
local fence = math.max((tonumber(st[2]) or 0) + 1, us)
mode = want
left = left + 1
redis.call('HSET', KEYS[1], 'mode', want, 'fence', num(fence), 'h:' .. tok, num(fence))
redis.call('ZADD', KEYS[2], num(now + ttl), tok)
settle(KEYS[1], KEYS[2], now, keep)
return {1, fence, readers(), code(mode)}
