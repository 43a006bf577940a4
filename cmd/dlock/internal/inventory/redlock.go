package inventory

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// The articles' RedLock.net call: CreateLockAsync(resource, expiryTime 30 s,
// waitTime 20 s, retryTime 1 s). RedLock.net's defaults add up to 3 quorum
// attempts per try with a random delay below 400 ms between them, and
// extend a held lock every expiry/2.
const (
	redlockWait        = 20 * time.Second
	redlockRetry       = 1 * time.Second
	redlockQuorumTries = 3
	redlockQuorumDelay = 400 * time.Millisecond
)

// redlockExtend resets the expiry if the caller still holds the key.
var redlockExtend = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0`)

// redlock is a self-contained Redlock client for the demo, written after
// RedLock.net's algorithm (the library's own redlock package is separate).
type redlock struct {
	nodes []redis.UniversalClient
}

type redlockHandle struct {
	r      *redlock
	key    string
	id     string
	expiry time.Duration
	stop   func()
}

// lock tries until it holds a quorum or wait elapses (or ctx ends); ok is
// false when it gave up.
func (r *redlock) lock(ctx context.Context, key string, expiry time.Duration) (*redlockHandle, bool) {
	id := newResourceID()
	deadline := time.Now().Add(redlockWait)
	for {
		if r.acquire(ctx, key, id, expiry) {
			h := &redlockHandle{r: r, key: key, id: id, expiry: expiry}
			h.stop = every(expiry/2, h.extend)
			return h, true
		}
		if !time.Now().Add(redlockRetry).Before(deadline) || sleep(ctx, redlockRetry) != nil {
			return nil, false
		}
	}
}

// acquire is RedLock.net's AcquireAsync: up to redlockQuorumTries rounds of
// SET NX PX on every node in turn; success needs a majority and time left.
func (r *redlock) acquire(ctx context.Context, key, id string, expiry time.Duration) bool {
	for try := 0; try < redlockQuorumTries; try++ {
		start := time.Now()
		got := 0
		for _, n := range r.nodes {
			if ok, err := n.SetNX(ctx, key, id, expiry).Result(); err == nil && ok {
				got++
			}
		}
		drift := expiry/100 + 2*time.Millisecond
		validity := expiry - time.Since(start) - drift
		if got >= len(r.nodes)/2+1 && validity > 0 {
			return true
		}
		r.release(ctx, key, id)
		if sleep(ctx, rand.N(redlockQuorumDelay)) != nil {
			return false
		}
	}
	return false
}

// release deletes the key on every node where id holds it.
func (r *redlock) release(ctx context.Context, key, id string) {
	ctx = context.WithoutCancel(ctx)
	for _, n := range r.nodes {
		releaseScript.Run(ctx, n, []string{key}, id)
	}
}

func (h *redlockHandle) extend() {
	ctx, cancel := context.WithTimeout(context.Background(), h.expiry/2)
	defer cancel()
	for _, n := range h.r.nodes {
		redlockExtend.Run(ctx, n, []string{h.key}, h.id, h.expiry.Milliseconds())
	}
}

// unlock stops the extension timer and releases on every node.
func (h *redlockHandle) unlock(ctx context.Context) {
	h.stop()
	h.r.release(ctx, h.key, h.id)
}

func (s *Service) buyRedlock(ctx context.Context, p Params) Answer {
	h, ok := s.rl.lock(ctx, RedlockKey, leaseOr(p.Lease, ArticleLease))
	if !ok {
		if ctx.Err() != nil {
			return failed(ctx.Err())
		}
		return lockFailed()
	}
	a := s.decrement(ctx, p, nil)
	_ = sleep(ctx, p.Stall)
	h.unlock(ctx)
	return a
}
