-- sem_inspect.lua: KEYS = [hash, expiries]
-- Reads the semaphore (see sem.lua) without writing: {limit, used, then
-- token, k, fence, ms left for each live holding}; limit and used are 0
-- when no holding is live.
local now = clock()
local limit = tonumber(redis.call('HGET', KEYS[1], 'n')) or 0
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. num(now), '+inf', 'WITHSCORES')
local out = {0, 0}
local used = 0
for i = 1, #live, 2 do
  local v = redis.call('HGET', KEYS[1], 'h:' .. live[i])
  if v then
    local k, fence = holding(v)
    used = used + k
    table.insert(out, live[i])
    table.insert(out, k)
    table.insert(out, fence)
    table.insert(out, tonumber(live[i + 1]) - now)
  end
end
if used > 0 then
  out[1], out[2] = limit, used
end
return out
