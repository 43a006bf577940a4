-- transfer.lua: KEYS = [lock, done, resource...]; ARGV = [from, to, ttl_ms, call id, retention_ms, value?]
-- (The lock is "<holds>:<fence>:<call id>:<owner>": see acquire.lua.)
-- Hands the lock from ARGV[1] (holding it exactly once) to ARGV[2] as a new
-- holding: new owner, one hold, fence max(last + 1, server TIME in µs), a
-- fresh expiry. No release is published: the lock is never free. done is
-- from's record "<call id>:<new fence>", kept ARGV[5] ms so that a replay
-- of this very call (go-redis retried after a lost reply) answers as the
-- first run did and writes nothing again, whatever happened to the lock
-- since. Without ARGV[6], KEYS[3] is an optional resource to read
-- (WithRead). With ARGV[6] (Lease.Commit), KEYS[3] is SET to it and KEYS[4]
-- is the optional resource to read.
-- Returns {1, fence} on success, with the read resource's value appended
-- (nil if missing) when there is one; {0} if nobody holds the lock, {-1} if
-- another owner does, {-2} if ARGV[1] holds it more than once (all three
-- write and change nothing). The read happens before any write, so a
-- WRONGTYPE error changes nothing.
local write = ARGV[6] ~= nil
local read = KEYS[3]
if write then
  read = KEYS[4]
end
local d = redis.call('GET', KEYS[2])
local n = #ARGV[4] + 1
if d and string.sub(d, 1, n) == ARGV[4] .. ':' then
  if read then -- a replay
    return {1, tonumber(string.sub(d, n + 1)), redis.call('GET', read)}
  end
  return {1, tonumber(string.sub(d, n + 1))}
end
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
local holds, fence, a, b, c = parse(v)
if not holds then
  return notalock()
end
if holds == 0 then
  return {0}
elseif string.sub(v, c + 1) ~= ARGV[1] then
  return {-1}
elseif holds ~= 1 then
  return {-2}
end
local val = false
if read then
  val = redis.call('GET', read)
end
if write then
  redis.call('SET', KEYS[3], ARGV[6])
  if read == KEYS[3] then
    val = ARGV[6]
  end
end
local t = redis.call('TIME')
local f = string.format('%d', math.max(fence + 1, t[1] * 1000000 + t[2]))
redis.call('SET', KEYS[1], '1:' .. f .. ':' .. ARGV[4] .. ':' .. ARGV[2], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[4] .. ':' .. f, 'PX', ARGV[5])
if read then
  return {1, tonumber(f), val}
end
return {1, tonumber(f)}
