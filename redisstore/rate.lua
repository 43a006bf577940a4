-- rate.lua: KEYS = [tat]; ARGV = [interval_us, burst, n]
-- GCRA (driver.RateLimiter) on the server's clock, in µs: the key holds
-- the TAT. n is admitted if TAT + n·interval − burst·interval <= now (a
-- missing or passed TAT counts as now); then the TAT moves on by
-- n·interval and the key expires when it passes (PX, rounded up), so an
-- idle key costs nothing. A denied call writes nothing.
-- Returns {allowed (n or 0), remaining, retry_after_us, reset_after_us}.
-- A key of another type fails the GET (WRONGTYPE), a string that is not a
-- number fails the script (NOTALOCK); both change nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv, burst, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('GET', KEYS[1])
local tat = now
if v then
  tat = tonumber(v)
  if not tat then
    return redis.error_reply('NOTALOCK the key holds a value that is not a dlock rate limiter')
  end
end
if tat < now then
  tat = now
end
local nxt = tat + n * iv
local allow_at = nxt - burst * iv
if allow_at > now then
  return {0, math.floor((now - tat + burst * iv) / iv), allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', string.format('%d', math.ceil((nxt - now) / 1000)))
return {n, math.floor((now - allow_at) / iv), 0, nxt - now}
