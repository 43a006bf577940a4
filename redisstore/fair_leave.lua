-- fair_leave.lua: KEYS = [lock, queue, waiters]; ARGV = [token, call id,
-- channel, retention_ms]
-- A FairStore waiter gives up (see fair.lua): its queue entry is removed,
-- and so is the hold its acquisition ARGV[2] added, if that call granted
-- the lock and is still the last call that changed it (its reply was lost):
-- the lock ("<holds>:<fence>:<call id>:<owner>", see acquire.lua) is held by
-- ARGV[1] and records ARGV[2]. At zero holds that leaves a tombstone for
-- ARGV[4] ms. When it freed the lock, or the lock is free and the caller
-- was the head of a queue that goes on, it publishes on ARGV[3] to wake the
-- next head.
-- Returns 1 if it removed a hold, 0 otherwise.
local head = redis.call('LINDEX', KEYS[2], 0)
if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
  redis.call('LREM', KEYS[2], 1, ARGV[1])
end
local v = redis.call('GET', KEYS[1])
local holds, a, b, c = 0, nil, nil, nil
if v then
  local _
  holds, _, a, b, c = parse(v)
  if not holds then
    return notalock()
  end
end
local undone = 0
if holds > 0 and string.sub(v, c + 1) == ARGV[1] and string.sub(v, b + 1, c - 1) == ARGV[2] then
  undone, holds = 1, holds - 1
  if holds > 0 then
    redis.call('SET', KEYS[1], holds .. string.sub(v, a, b) .. ARGV[2] .. 'u:' .. ARGV[1], 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], '0' .. string.sub(v, a, b) .. ':', 'PX', ARGV[4])
  end
end
if holds == 0 and (undone == 1 or (head == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 1)) then
  redis.call('PUBLISH', ARGV[3], 'released')
end
return undone
