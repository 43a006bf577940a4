-- idem_abandon.lua: KEYS = [record]; ARGV = [token, fence]
-- Deletes the record if ARGV[1] and ARGV[2] own it in flight (see
-- idem.lua). Replies 1; -1 if it is gone, -2 if another executor owns or
-- completed it (or they completed it), changing nothing.
local own = owner(KEYS[1])
if own == 0 then
  return -2
elseif own ~= 1 then
  return own
end
redis.call('DEL', KEYS[1])
return 1
