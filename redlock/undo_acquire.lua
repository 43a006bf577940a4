-- undo_acquire.lua: KEYS = [lock]; ARGV = [token, call id, channel, retention_ms]
-- Removes the hold that acquisition ARGV[2] of ARGV[1] added, only if that
-- acquisition is the last call that changed the lock: the lock
-- ("<holds>:<fence>:<call id>:<owner>", see redisstore's acquire.lua) is held
-- by ARGV[1] and still records call id ARGV[2]. Anything else (the
-- acquisition never arrived, or a later call of the same owner, say its
-- acquisition through another process, changed the lock since) is left
-- alone. It records ARGV[2] .. 'u' as the call id, so that a replay finds
-- nothing to undo. At zero holds it leaves a tombstone (holds 0, same fence)
-- for ARGV[4] ms and publishes on ARGV[3], as a release does. Returns 1 if
-- it removed a hold, 0 otherwise.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local a = string.find(v, ':', 1, true)
local b = a and string.find(v, ':', a + 1, true)
local c = b and string.find(v, ':', b + 1, true)
local holds = c and tonumber(string.sub(v, 1, a - 1))
if not holds or not tonumber(string.sub(v, a + 1, b - 1)) then
  return redis.error_reply('NOTALOCK the key holds a value that is not a dlock lock')
end
if holds == 0 or string.sub(v, c + 1) ~= ARGV[1] or string.sub(v, b + 1, c - 1) ~= ARGV[2] then
  return 0
end
holds = holds - 1
if holds > 0 then
  redis.call('SET', KEYS[1], holds .. string.sub(v, a, b) .. ARGV[2] .. 'u:' .. ARGV[1], 'KEEPTTL')
  return 1
end
redis.call('SET', KEYS[1], '0' .. string.sub(v, a, b) .. ':', 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[3], 'released')
return 1
