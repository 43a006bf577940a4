package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// NeverEvict turns f into the negative control of the eviction tests: its
// waiters run fair.lua without the eviction, so a waiter that stopped
// renewing keeps its place for as long as others renew theirs.
func NeverEvict(f *FairStore) { f.acquire = hotNeverEvict }

var (
	neverEvictSrc = strings.Replace(fairAcquireSrc,
		"local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowms)", "local dead = {}", 1)
	hotNeverEvict = newHotScript(redis.NewScript(neverEvictSrc), neverEvictSrc)
)
