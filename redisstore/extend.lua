-- extend.lua: KEYS = [lock, meta?]; ARGV = [token, ttl_ms]
-- Returns {1, fence, holds} after setting the expiry to ttl (longer or
-- shorter: the store follows the latest Extend) if ARGV[1] holds the lock
-- (see acquire.lua for the layout); {0} if nobody holds it (no key or a
-- tombstone); {-1} if another owner does, or if the tombstone is one that
-- break.lua left for ARGV[1] (its holding was broken). Never creates it,
-- and leaves the call id alone so that a replayed release is recognised.
-- The meta key (holder metadata, see acquire.lua), if there is one, gets
-- the same expiry.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
local holds, fence, a, b, c = parse(v)
if not holds then
  return notalock()
end
if holds == 0 then
  if string.sub(v, c + 1) == ARGV[1] then
    return {-1} -- a tombstone left by break.lua for this owner
  end
  return {0}
end
if string.sub(v, c + 1) ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return {1, fence, holds}
