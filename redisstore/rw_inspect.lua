-- rw_inspect.lua: KEYS = [hash, expiries]
-- Reads the read-write lock (see rw.lua) without writing: {mode, ms left
-- of the mark (0: none), then token, fence, ms left for each live
-- holding}; mode is 0 when no holding is live.
local now = clock()
local st = redis.call('HMGET', KEYS[1], 'mode', 'waitexp')
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. num(now), '+inf', 'WITHSCORES')
local out = {0, 0}
if st[2] and tonumber(st[2]) > now then
  out[2] = tonumber(st[2]) - now
end
for i = 1, #live, 2 do
  local f = redis.call('HGET', KEYS[1], 'h:' .. live[i])
  if f then
    out[1] = code(st[1])
    table.insert(out, live[i])
    table.insert(out, tonumber(f))
    table.insert(out, tonumber(live[i + 1]) - now)
  end
end
return out
