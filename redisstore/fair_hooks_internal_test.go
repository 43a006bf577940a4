package redisstore

import (
	"context"
	"strings"
	"time"

	"example.com/dlock/driver"

	"github.com/redis/go-redis/v9"
)

// Mutants of fair.lua, the negative controls of the eviction tests, and
// hooks into a FairStore's single steps.

// NeverEvict makes f's waiters run fair.lua without the eviction: a waiter
// that stopped renewing keeps its place for as long as others renew theirs.
func NeverEvict(f *FairStore) { f.acquire = hotNeverEvict }

// LIFOQueue makes f's waiters join the queue at its head, the last first.
func LIFOQueue(f *FairStore) { f.acquire = hotLIFO }

// ChainDeadlines makes f's waiters count their waiter lease from the latest
// deadline of the waiters ahead of them, as Redisson's RFairLock does: dead
// waiters in a row are evicted one waiter lease after the other.
func ChainDeadlines(f *FairStore) { f.acquire = hotChained }

var (
	neverEvictSrc = mustReplace(fairAcquireSrc,
		"local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowms)", "local dead = {}")
	chainedSrc = mustReplace(fairAcquireSrc,
		"redis.call('ZADD', KEYS[3], nowms + tonumber(ARGV[4]), ARGV[1])",
		"redis.call('ZADD', KEYS[3], chained(nowms) + tonumber(ARGV[4]), ARGV[1])")
	lifoSrc       = mustReplace(fairAcquireSrc, "redis.call('RPUSH', KEYS[2], ARGV[1])", "redis.call('LPUSH', KEYS[2], ARGV[1])")
	hotLIFO       = newHotScript(redis.NewScript(lifoSrc), lifoSrc)
	hotNeverEvict = newHotScript(redis.NewScript(neverEvictSrc), neverEvictSrc)
	hotChained    = newHotScript(redis.NewScript(chainedLua+chainedSrc), chainedLua+chainedSrc)
)

// chainedLua is the latest of now and the deadlines of the waiters ahead of
// ARGV[1] (all of them when it is not queued yet).
const chainedLua = `
local function chained(now)
  for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    if w == ARGV[1] then
      break
    end
    now = math.max(now, tonumber(redis.call('ZSCORE', KEYS[3], w) or 0))
  end
  return now
end
`

func mustReplace(src, old, new string) string {
	if !strings.Contains(src, old) {
		panic("mutant: fair.lua no longer contains " + old)
	}
	return strings.Replace(src, old, new, 1)
}

// FairTry runs one try of f (fair.lua) with the caller's call id, as a
// resent command would carry the first one's.
func FairTry(ctx context.Context, f *FairStore, key, token string, ttl time.Duration, call string, join bool) (driver.Grant, error) {
	return f.try(ctx, key, token, ttl, call, join)
}

// FairLeave runs the clean-up of a waiter that gave up after call.
func FairLeave(ctx context.Context, f *FairStore, key, token, call string) {
	f.leave(ctx, key, token, call)
}
