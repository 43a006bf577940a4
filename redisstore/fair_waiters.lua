-- fair_waiters.lua: KEYS = [waiters]; returns how many waiters of a
-- FairStore's queue (see fair.lua) hold a waiter lease that has not ended.
local t = redis.call('TIME')
local nowms = t[1] * 1000 + math.floor(t[2] / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. nowms, '+inf')
