package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hot path (acquire, release, transfer) sends EVALSHA through Do with
// its arguments in one slice: the script hash and source are boxed once,
// the lock's Redis keys are built in one string, and the reply is read
// without converting it to a new slice. This halves the allocations of
// go-redis's Script.Run for the same single round trip.

// hotScript is a script with its hash and source boxed for Do.
type hotScript struct {
	sha, src any
}

func newHotScript(s *redis.Script, src string) hotScript {
	return hotScript{sha: s.Hash(), src: src}
}

// run sends EVALSHA with args (keys first, numKeys of them), falling back to
// EVAL when the server does not have the script (after a restart or a
// SCRIPT FLUSH). args[0:3] are filled here.
func (h hotScript) run(ctx context.Context, c redis.UniversalClient, args []any) *redis.Cmd {
	args[0], args[1] = "evalsha", h.sha
	cmd := c.Do(ctx, args...)
	if isNoScript(cmd.Err()) {
		args[0], args[1] = "eval", h.src
		cmd = c.Do(ctx, args...)
	}
	return cmd
}

var (
	hotAcquire  = newHotScript(acquireScript, acquireSrc)
	hotRelease  = newHotScript(releaseScript, releaseSrc)
	hotTransfer = newHotScript(transferScript, transferSrc)
)

// done returns the lock key of key, its release channel and the key of
// token's record of its final release or transfer (see release.lua), all in
// one allocation: the record is the channel's name followed by ":" and the
// token (keys and channels are separate namespaces in Redis).
func (s *Store) done(key, token string) (lock, channel, done string) {
	done = s.prefix + "{" + key + "}:released:" + token
	channel = done[:len(done)-len(token)-1]
	return channel[:len(channel)-len(":released")], channel, done
}

// callID returns an id for one call that changes a lock, unique within the
// process (and so for each owner token, which lives in one process): the
// scripts record it so that a command resent by go-redis is recognised. It
// is boxed as an integer: one allocation per call.
func callID() any { return calls.Add(1) }

var calls atomic.Uint64

// ttlArg boxes a TTL in milliseconds, reusing the last box: applications
// mostly use one lease length.
func ttlArg(ttl time.Duration) any {
	m := ms(ttl)
	if b := lastTTL.Load(); b != nil && b.ms == m {
		return b.v
	}
	b := &boxedTTL{ms: m, v: m}
	lastTTL.Store(b)
	return b.v
}

type boxedTTL struct {
	ms int64
	v  any
}

var lastTTL atomic.Pointer[boxedTTL]

// ints reads an array reply of integers into dst without allocating.
func ints(cmd *redis.Cmd, dst []int64) ([]int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	for _, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("redisstore: unexpected reply %v", v)
		}
		dst = append(dst, n)
	}
	return dst, nil
}
