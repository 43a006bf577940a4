-- lock.lua: the lock layout, put in front of every script that reads a lock
-- (redisstore.go joins them). A lock is "<holds>:<fence>:<call id>:<owner>"
-- (see acquire.lua); holds 0 is a tombstone.
-- cut(v) returns the positions a, b, c of the first three colons of v (c
-- nil if it has fewer): the hot paths read the fields they need with
-- string.sub, and parse only digits they must compute with.
local function cut(v)
  local a = string.find(v, ':', 1, true)
  local b = a and string.find(v, ':', a + 1, true)
  return a, b, b and string.find(v, ':', b + 1, true)
end

-- parse(v) returns holds, fence and the positions a, b, c of the three
-- colons, or nil when v is not a lock.
local function parse(v)
  local a, b, c = cut(v)
  local holds = c and tonumber(string.sub(v, 1, a - 1))
  local fence = c and tonumber(string.sub(v, a + 1, b - 1))
  if not holds or not fence then
    return nil
  end
  return holds, fence, a, b, c
end

-- notalock is the error for a value at the lock's key that is not a lock.
local function notalock()
  return redis.error_reply('NOTALOCK the key holds a value that is not a dlock lock')
end

