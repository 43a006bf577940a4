-- fair.lua: the queue in front of acquire.lua on a FairStore (fair.go joins
-- lock.lua, this and acquire.lua, whose optional resource key becomes
-- KEYS[4], and which reuses this script's TIME). KEYS = [lock, queue, waiters, resource?]; ARGV = [token, ttl_ms,
-- call id, waiter lease ms, join ("1" or "0"), channel].
-- queue lists the waiting tokens in arrival order; waiters scores the same
-- tokens by the server time (ms) at which each one's waiter lease ends.
-- First every waiter whose own lease has ended is evicted, whatever its
-- place: no deadline depends on another waiter's. Then the caller may take
-- the lock (acquire.lua runs on) only if it holds it already (a re-entry or
-- a replay), or the lock is free and the queue is empty or starts with the
-- caller, which then leaves the queue. Otherwise, with join, it joins the
-- tail or renews its waiter lease where it is, and both keys expire with
-- the last waiter lease; it returns {0, pttl}, -1 for a free lock with
-- others ahead. An eviction that leaves a free lock to another head
-- publishes on the channel, to wake that head.
local tq = redis.call('TIME')
local nowms = tq[1] * 1000 + math.floor(tq[2] / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowms)
for _, w in ipairs(dead) do
  redis.call('LREM', KEYS[2], 1, w)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', nowms)
end
local head = redis.call('LINDEX', KEYS[2], 0)
local cur = redis.call('GET', KEYS[1])
local held, mine = false, false
if cur then
  local h, _, _, _, c = parse(cur)
  if not h then
    return notalock()
  end
  held = h > 0
  mine = held and string.sub(cur, c + 1) == ARGV[1]
end
if not mine and (held or (head and head ~= ARGV[1])) then
  if ARGV[5] == '1' then
    if redis.call('ZADD', KEYS[3], nowms + tonumber(ARGV[4]), ARGV[1]) == 1 then
      redis.call('RPUSH', KEYS[2], ARGV[1])
    end
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[2], last[2])
    redis.call('PEXPIREAT', KEYS[3], last[2])
  end
  if #dead > 0 and not held and head ~= ARGV[1] then
    redis.call('PUBLISH', ARGV[6], 'released')
  end
  if held then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  return {0, -1}
end
if (head == ARGV[1] or (mine and head)) and redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
  redis.call('LREM', KEYS[2], 1, ARGV[1])
end
