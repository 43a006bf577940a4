-- inspect.lua: KEYS = [lock, fence]; ARGV = []
-- Returns {owner or '', holds or 0, pttl, last fence or 0}; changes nothing.
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds')
local fence = redis.call('GET', KEYS[2])
return {v[1] or '', tonumber(v[2]) or 0, redis.call('PTTL', KEYS[1]), tonumber(fence) or 0}
