-- rw_release.lua: KEYS = [hash, expiries, record]; ARGV = [token, call id, retention_ms, channel]
-- Ends ARGV[1]'s holding (see rw.lua), records the call id in KEYS[3] for
-- the retention, and, if no holding is left, publishes on the channel so
-- that waiters wake. A reader leaving other readers lets nobody in (a
-- waiting writer needs the key free; a reader refused waits for a writer
-- or a mark, whose own ends wake or time it), so it publishes nothing:
-- each read holding would otherwise wake every waiter to be refused again.
-- Returns 1; 0 for a replay of this very call (go-redis resent it after a
-- lost reply: the record holds its call id), changing nothing; -1 if the
-- token holds nothing, changing nothing.
local now = clock()
prune(KEYS[1], KEYS[2], now)
if not redis.call('HGET', KEYS[1], 'h:' .. ARGV[1]) then
  if redis.call('GET', KEYS[3]) == ARGV[2] then
    return 0
  end
  return -1
end
redis.call('HDEL', KEYS[1], 'h:' .. ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local free = redis.call('ZCARD', KEYS[2]) == 0
if free then
  redis.call('HDEL', KEYS[1], 'mode')
end
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
settle(KEYS[1], KEYS[2], now, tonumber(ARGV[3]))
if free then
  redis.call('PUBLISH', ARGV[4], 'released')
end
return 1
