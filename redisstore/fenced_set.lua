-- fenced_set.lua: KEYS = [resource]; ARGV = [fence, value]
-- A fenced register for protected data: stores {value, fence} only if
-- ARGV[1] is not below the fence stored with the current value.
-- Returns 1 when written, 0 when the fence was stale (nothing changed).
local current = tonumber(redis.call('HGET', KEYS[1], 'fence'))
if current and tonumber(ARGV[1]) < current then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
return 1
