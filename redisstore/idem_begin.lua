-- idem_begin.lua: KEYS = [record]; ARGV = [token, fingerprint, lease_ms, keep_ms]
-- Starts an execution for ARGV[1], or says why not (see idem.lua for the
-- layout). Replies: {1, fence, lease ms left, took over 0|1} when the
-- caller is the executor (a new record, a takeover after the lease, with a
-- fence of max(last + 1, server TIME in µs), or a resent begin of the
-- owner, whose lease becomes the later of its own and ARGV[3] from now,
-- answered as its first run was: took over as it was);
-- {2, fence, lease ms left} while another executor's lease is live;
-- {3, fence, retention ms left, result} when completed; {-1, completed
-- 0|1} for another fingerprint. Only the first reply changes anything.
local now, us = clock()
local r = redis.call('HMGET', KEYS[1], 'tok', 'fence', 'fp', 'lease', 'done', 'keep', 'took')
local fence, lease, keep = tonumber(r[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if fence then
  if r[3] ~= ARGV[2] then
    return {-1, r[5] and 1 or 0}
  end
  if r[5] then
    return {3, fence, redis.call('PTTL', KEYS[1]), redis.call('HGET', KEYS[1], 'res')}
  end
  local ends = tonumber(r[4])
  if r[1] == ARGV[1] then
    ends = math.max(ends, now + lease)
    redis.call('HSET', KEYS[1], 'lease', num(ends))
    redis.call('PEXPIRE', KEYS[1], num(ends - now + tonumber(r[6])))
    return {1, fence, ends - now, tonumber(r[7]) or 0}
  end
  if now < ends then
    return {2, fence, ends - now}
  end
end
local nf = math.max((fence or 0) + 1, us)
redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'fence', num(nf), 'fp', ARGV[2], 'lease', num(now + lease), 'keep', num(keep), 'took', fence and '1' or '0')
redis.call('PEXPIRE', KEYS[1], num(lease + keep))
return {1, nf, lease, fence and 1 or 0}
