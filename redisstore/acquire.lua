-- acquire.lua: KEYS = [lock, resource?, meta?]; ARGV = [token, ttl_ms, call id, meta?]
-- The lock is one string "<holds>:<fence>:<call id>:<owner>" with an expiry
-- (see the package doc). holds 0 is a tombstone: a free lock that keeps its
-- last fence and the last call that changed it for the retention window.
-- A new holding gets fence max(last fence + 1, server TIME in µs): strictly
-- increasing while the tombstone lives, and after it is gone as long as the
-- server's clock does not step back past the fences issued before.
-- Returns the fence alone (an integer >= 1) for a first hold, {1, fence,
-- holds} for a re-entry, {0, pttl} when another owner holds it (changing
-- nothing). A re-entry never shortens the expiry: it becomes max(PTTL, ttl).
-- A replay of this very call (same owner and call id: go-redis retried after
-- a lost reply) answers what the first run did and changes nothing.
-- With KEYS[2] (WithRead), a granted reply is {1, fence, holds, GET KEYS[2]}
-- (nil if missing); it is read before any write, so a WRONGTYPE error
-- changes nothing. A value that is not a lock is an error (NOTALOCK).
-- With ARGV[4] (holder metadata; exactly four ARGV: fair.lua, which runs
-- this script as its tail, passes six and never metadata), the last key is
-- the meta key: a new holding sets it to "<fence>:<meta>" with the lock's
-- expiry, a re-entry that lengthens the lock lengthens it too (inspect.lua
-- shows it only while its fence is the lock's).
local mkey = #ARGV == 4 and KEYS[#KEYS]
local res = KEYS[2] ~= mkey and KEYS[2]
local val = false
if res then
  val = redis.call('GET', res)
end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local tail = ':' .. ARGV[3] .. ':' .. ARGV[1]
local fence = now
local old = redis.call('SET', KEYS[1], '1:' .. string.format('%d', now) .. tail, 'NX', 'PX', ARGV[2], 'GET')
local holds = 1
local fresh = not old
if old then
  local last, a, b, c
  holds, last, a, b, c = parse(old)
  if not holds then
    return notalock()
  end
  if holds == 0 then
    fence, holds, fresh = math.max(last + 1, now), 1, true
    redis.call('SET', KEYS[1], '1:' .. string.format('%d', fence) .. tail, 'PX', ARGV[2])
  elseif string.sub(old, c + 1) ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  elseif string.sub(old, b + 1, c - 1) ~= ARGV[3] then
    fence, holds = last, holds + 1
    local v = holds .. ':' .. string.sub(old, a + 1, b - 1) .. tail
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
      redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
      if mkey then
        redis.call('PEXPIRE', mkey, ARGV[2])
      end
    else
      redis.call('SET', KEYS[1], v, 'KEEPTTL')
    end
  else
    fence = last -- a replay: the first run's answer
  end
end
if fresh and mkey then
  redis.call('SET', mkey, string.format('%d', fence) .. ':' .. ARGV[4], 'PX', ARGV[2])
end
if res then
  return {1, fence, holds, val}
end
if holds == 1 then
  return fence
end
return {1, fence, holds}
