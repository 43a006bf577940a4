-- rw.lua: the read-write lock layout, put in front of every rw script
-- (rwmutex.go joins them). A read-write lock K is a hash PREFIX{K}:rw with
-- fence (the last fence issued), mode ('r' or 'w', while anything holds
-- it), h:<token> = <fence> per holding, and the writer-waiting mark: wait
-- (the token of the writer that set it last) and waitexp; and a sorted set
-- PREFIX{K}:rw:exp of token -> expiry. Times are in ms on the server's
-- clock. Numbers are written with num: Lua's own conversion keeps only 14
-- digits, too few for a fence.
local function num(x)
  return string.format('%d', x)
end

-- clock returns the server's time in ms and in µs.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- prune drops the holdings whose expiry is at or before now, and the mark
-- if it has expired, and returns how many holdings are left. It reads both
-- keys before it writes either, so a key of another type fails the script
-- (WRONGTYPE) with nothing changed.
local function prune(h, z, now)
  local st = redis.call('HMGET', h, 'mode', 'waitexp')
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', num(now))
  for _, tok in ipairs(gone) do
    redis.call('HDEL', h, 'h:' .. tok)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', z, '-inf', num(now))
  end
  local left = redis.call('ZCARD', z)
  if left == 0 and st[1] then
    redis.call('HDEL', h, 'mode')
  end
  if st[2] and tonumber(st[2]) <= now then
    redis.call('HDEL', h, 'wait', 'waitexp')
  end
  return left
end

-- settle makes both keys expire keep ms after the last holding or the mark
-- ends; with neither left only the fence stays, for keep ms.
local function settle(h, z, now, keep)
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  local till = now
  if #last > 0 then
    till = tonumber(last[2])
  end
  local we = tonumber(redis.call('HGET', h, 'waitexp'))
  if we and we > till then
    till = we
  end
  local ttl = num(till - now + keep)
  redis.call('PEXPIRE', h, ttl)
  if #last > 0 then
    redis.call('PEXPIRE', z, ttl)
  end
end

-- code is a mode's number in replies: 0 none, 1 read, 2 write.
local function code(mode)
  if mode == 'r' then
    return 1
  elseif mode == 'w' then
    return 2
  end
  return 0
end
