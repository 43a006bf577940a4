-- idem_extend.lua: KEYS = [record]; ARGV = [token, fence, lease_ms]
-- Sets the lease of the record to ARGV[3] from now if ARGV[1] and ARGV[2]
-- own it in flight (see idem.lua). Replies 1; -1 if it is gone, -2 if
-- another executor owns or completed it, changing nothing.
local own, keep = owner(KEYS[1])
if own == 0 then
  return -2
elseif own ~= 1 then
  return own
end
local now = clock()
local ends = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lease', num(ends))
redis.call('PEXPIRE', KEYS[1], num(ends - now + keep))
return 1
