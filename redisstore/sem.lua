-- sem.lua: the semaphore layout, put in front of every semaphore script
-- (semaphore.go joins them). A semaphore K is a hash PREFIX{K}:sem with
-- n (the limit, while permits are out), used (the permits out), fence (the
-- last fence issued) and h:<token> = "<k>:<fence>" per holding, and a
-- sorted set PREFIX{K}:sem:exp of token -> expiry, in ms on the server's
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

-- holding parses "<k>:<fence>".
local function holding(v)
  local c = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
end

-- prune drops the holdings whose expiry is at or before now and returns the
-- permits still out. It reads both keys before it writes either, so a key
-- of another type fails the script (WRONGTYPE) with nothing changed.
local function prune(h, z, now)
  local used = tonumber(redis.call('HGET', h, 'used')) or 0
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', num(now))
  if #gone == 0 then
    return used
  end
  for _, tok in ipairs(gone) do
    local v = redis.call('HGET', h, 'h:' .. tok)
    if v then
      used = used - holding(v)
      redis.call('HDEL', h, 'h:' .. tok)
    end
  end
  redis.call('ZREMRANGEBYSCORE', z, '-inf', num(now))
  redis.call('HSET', h, 'used', num(used))
  return used
end

-- settle makes both keys expire keep ms after the last holding ends; with
-- none left it forgets the limit and keeps only the fence, for keep ms.
local function settle(h, z, now, keep)
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('HDEL', h, 'n', 'used')
    redis.call('PEXPIRE', h, num(keep))
    return
  end
  local ttl = num(tonumber(last[2]) - now + keep)
  redis.call('PEXPIRE', h, ttl)
  redis.call('PEXPIRE', z, ttl)
end

