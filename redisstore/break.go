package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var (
	//go:embed break.lua
	breakLua    string
	breakScript = redis.NewScript(lockLua + breakLua)
)

var _ driver.Breaker = (*Store)(nil)

// Break implements driver.Breaker in one script call. A held lock becomes a
// tombstone that keeps its fence (the next holding's is greater) and names
// the broken owner, for the longer of the retention and what the holding
// had left: until then the owner's Extend and Release answer
// driver.NotHeld(taken). Waiters are woken as by a release. A free lock
// (or a tombstone) returns Held false and changes nothing; so does a break
// that go-redis resent after a lost reply, though the first run broke the
// lock. A key holding a value that is not a lock, of any Redis type, is
// deleted and reported as NotALock. Other errors are as for Acquire.
func (s *Store) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	if err := checkKey(key); err != nil {
		return driver.BrokenHolding{}, err
	}
	v, err := breakScript.Run(ctx, s.client, []string{s.lock(key)}, s.channel(key), s.keep).Slice()
	if err != nil {
		return driver.BrokenHolding{}, classify(err, key)
	}
	return brokenHolding(v)
}

// brokenHolding decodes break.lua's reply.
func brokenHolding(v []any) (driver.BrokenHolding, error) {
	if len(v) == 1 {
		switch v[0] {
		case int64(0):
			return driver.BrokenHolding{}, nil
		case int64(-1):
			return driver.BrokenHolding{Info: driver.Info{Held: true, Remaining: -1}, NotALock: true}, nil
		}
	}
	if len(v) == 5 && v[0] == int64(1) {
		owner, _ := v[1].(string)
		holds, _ := v[2].(int64)
		ttl, _ := v[3].(int64)
		fs, _ := v[4].(string)
		if fence, err := strconv.ParseUint(fs, 10, 64); err == nil {
			return driver.BrokenHolding{Info: driver.Info{Held: true, Token: owner, Holds: int(holds), Remaining: pttl(ttl), Fence: fence}}, nil
		}
	}
	return driver.BrokenHolding{}, fmt.Errorf("redisstore: unexpected break reply %v", v)
}
