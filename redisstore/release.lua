-- release.lua: KEYS = [lock, done?, resource?]; ARGV = [token, channel, call id, retention_ms, value?, fence?]
-- Removes one hold of ARGV[1] (the lock is "<holds>:<fence>:<call id>:<owner>",
-- see acquire.lua) and records this call's id in it. At zero it leaves a
-- tombstone (holds 0, same fence) for ARGV[4] ms, sets done (the owner's
-- "<call id>:<fence>" record, see transfer.lua) for as long, and publishes on
-- the lock's channel so that waiters wake. With KEYS[3] (Lease.Commit),
-- first SETs it to ARGV[5] (replacing whatever it held), only for the holder.
-- Returns the holds left (>= 0), -1 if nobody holds the lock, -2 if another
-- owner does or ARGV[1]'s holding was broken (break.lua's tombstone names
-- it), writing and changing nothing. A replay of this very call
-- (go-redis retried after a lost reply) finds its call id in the lock or in
-- done, returns what the first run did, and writes nothing again. Without
-- done (a client that never resends: no replay can come) there is no
-- record.
-- With ARGV[6] (digits; ARGV[5] is then ignored without KEYS[3]) the
-- tombstone's fence is at least ARGV[6]: Redlock's fence raise, carried by
-- the release that ends the holding (see package redlock).
local function raised(f) -- f is ":<fence>"
  local m = ARGV[6]
  if m and (#m > #f - 1 or (#m == #f - 1 and m > string.sub(f, 2))) then
    return ':' .. m
  end
  return f
end
local v = redis.call('GET', KEYS[1])
-- The common case, a final release ("1:..."), is read with one match and
-- no tonumber.
local f, id
if v then
  f, id = string.match(v, '^1(:%d+):([^:]*):')
end
if f and string.sub(v, #f + #id + 4) == ARGV[1] then
  if id == ARGV[3] then
    return 1 -- a replay of a release that left one hold
  end
  if KEYS[3] then
    redis.call('SET', KEYS[3], ARGV[5])
  end
  f = raised(f)
  redis.call('SET', KEYS[1], '0' .. f .. '::', 'PX', ARGV[4])
  if KEYS[2] then
    redis.call('SET', KEYS[2], ARGV[3] .. f, 'PX', ARGV[4])
  end
  redis.call('PUBLISH', ARGV[2], 'released')
  return 0
end
local holds, a, b, c = 0, nil, nil, nil
if v then
  local _
  holds, _, a, b, c = parse(v)
  if not holds then
    return notalock()
  end
end
if holds == 0 or string.sub(v, c + 1) ~= ARGV[1] then
  local d = KEYS[2] and redis.call('GET', KEYS[2])
  if d and string.sub(d, 1, #ARGV[3] + 1) == ARGV[3] .. ':' then
    return 0 -- a replay of the final release
  elseif holds == 0 and (not v or string.sub(v, c + 1) ~= ARGV[1]) then
    return -1
  end
  return -2 -- another owner holds it, or break.lua left its tombstone for ARGV[1]
end
if string.sub(v, b + 1, c - 1) == ARGV[3] then
  return holds -- a replay of a release that left holds
end
if KEYS[3] then
  redis.call('SET', KEYS[3], ARGV[5])
end
holds = holds - 1
if holds > 0 then
  redis.call('SET', KEYS[1], holds .. string.sub(v, a, b) .. ARGV[3] .. ':' .. ARGV[1], 'KEEPTTL')
  return holds
end
local f = raised(string.sub(v, a, b - 1))
redis.call('SET', KEYS[1], '0' .. f .. '::', 'PX', ARGV[4])
if KEYS[2] then
  redis.call('SET', KEYS[2], ARGV[3] .. f, 'PX', ARGV[4])
end
redis.call('PUBLISH', ARGV[2], 'released')
return 0
