-- inspect.lua: KEYS = [lock, fence]; ARGV = []
-- Returns {owner or '', holds or 0, pttl, last fence or 0}; changes nothing.
-- The lock is "<holds>:<owner>" (see acquire.lua).
local v = redis.call('GET', KEYS[1])
local owner, holds = '', 0
if v then
  local i = string.find(v, ':', 1, true)
  local h = i and tonumber(string.sub(v, 1, i - 1))
  if h then
    owner, holds = string.sub(v, i + 1), h
  end
end
local fence = redis.call('GET', KEYS[2])
return {owner, holds, redis.call('PTTL', KEYS[1]), tonumber(fence) or 0}
