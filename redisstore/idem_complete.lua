-- idem_complete.lua: KEYS = [record]; ARGV = [token, fence, result]
-- Stores the result if ARGV[1] and ARGV[2] own the record in flight (see
-- idem.lua), keeping it for the record's retention from now. Replies 1;
-- 0 for a resent completion (they completed it already), changing
-- nothing; -1 if the record is gone, -2 if another executor owns or
-- completed it, both changing nothing.
local own, keep = owner(KEYS[1])
if own ~= 1 then
  return own
end
redis.call('HDEL', KEYS[1], 'lease')
redis.call('HSET', KEYS[1], 'done', '1', 'res', ARGV[3])
redis.call('PEXPIRE', KEYS[1], num(keep))
return 1
