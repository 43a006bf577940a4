-- idem.lua: the layout of an idempotency record, put in front of every
-- idempotency script (idempotency.go joins them). A record is one hash
-- PREFIX idem:{<hex scope>:<key>} with tok (the executor's token), fence,
-- fp (the request's fingerprint), keep (the retention, ms), took (1 if this
-- execution took the record over: a resent begin answers it again) and, in
-- flight, lease (when another may take over, ms on the server's clock) or, once
-- completed, done = 1 and res (the result). The hash expires keep ms after
-- the lease ends, or keep ms after completion. Numbers are written with
-- num: Lua's own conversion keeps only 14 digits, too few for a fence.
local function num(x)
  return string.format('%d', x)
end

-- clock returns the server's time in ms and in µs.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- owner reads the record and returns 1 if token ARGV[1] and fence ARGV[2]
-- own it in flight, 0 if they completed it, -1 if it is gone, -2 if
-- another executor owns or completed it; and the record's keep.
local function owner(k)
  local r = redis.call('HMGET', k, 'tok', 'fence', 'done', 'keep')
  if not r[2] then
    return -1
  end
  if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then
    return -2
  end
  if r[3] then
    return 0
  end
  return 1, tonumber(r[4])
end

