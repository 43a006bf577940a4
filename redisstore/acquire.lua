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
-- The fence stays a string of digits on the common paths (no tonumber):
-- TIME's seconds and zero-padded microseconds are the µs count, and two
-- such strings of one length compare as their numbers do.
local t = redis.call('TIME')
local now = t[1] .. string.sub('00000', #t[2]) .. t[2]
local v = '1:' .. now .. ':' .. ARGV[3] .. ':' .. ARGV[1]
-- GET, then one SET: cheaper for Redis than SET NX GET followed by a
-- second SET over a tombstone, the common case of a key used again.
local old = redis.call('GET', KEYS[1])
local fence, holds = now, 1
local fresh = true
if old then
  local h, last, id = string.match(old, '^(%d+):(%d+):([^:]*):')
  if not h then
    return notalock()
  end
  if h == '0' then -- a tombstone
    if #last > #now or (#last == #now and last >= now) then
      fence = string.format('%d', tonumber(last) + 1)
      v = '1:' .. fence .. ':' .. ARGV[3] .. ':' .. ARGV[1]
    end
  elseif string.sub(old, #h + #last + #id + 4) ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  else
    fence, holds, fresh = last, tonumber(h), false
    if id ~= ARGV[3] then -- not a replay
      holds = holds + 1
      v = holds .. ':' .. last .. ':' .. ARGV[3] .. ':' .. ARGV[1]
      if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
        if mkey then
          redis.call('PEXPIRE', mkey, ARGV[2])
        end
      else
        redis.call('SET', KEYS[1], v, 'KEEPTTL')
      end
    end
  end
end
if fresh then
  redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
end
if fresh and mkey then
  redis.call('SET', mkey, fence .. ':' .. ARGV[4], 'PX', ARGV[2])
end
fence = tonumber(fence)
if res then
  return {1, fence, holds, val}
end
if holds == 1 then
  return fence
end
return {1, fence, holds}
