package dlock

import (
	"context"
	"errors"
	"time"
)

// The give-back. A holding can end without the store confirming its release:
// Release with a context that had ended or a reply that was lost, a lease
// lost on the local clock, an acquisition whose reply was lost, a handoff
// with no answer, the holds of an Owner that outlived its last live
// holding (record.go). On a per-key store such a hold would stay until its
// TTL; on a session store (etcd, ZooKeeper, the SQL session locks), for as
// long as the session lives, which the Client's other leases keep alive. So
// the Client gives it back in the background: token-checked releases,
// retried with backoff and jitter until the store confirms or says the token
// holds nothing, for at most giveBackBound. Close waits for them.

// giveBackRetry paces the retries of a give-back whose release got no
// answer: jittered, from 10 ms up to a second.
var giveBackRetry = ExponentialBackoff(10*time.Millisecond, time.Second)

// giveBackBound is how long a give-back keeps trying: the lease (on a
// per-key store the key has expired by then anyway), and at least the
// session's TTL on a session store (a session that cannot be reached for
// that long has expired, freeing its keys).
func (c *Client) giveBackBound(ttl time.Duration) time.Duration {
	return max(ttl, c.model.SessionTTL, time.Second)
}

// giveBack releases, in the background, up to n holds of token on key
// (see above), not before notBefore (the validity a lost lease reported:
// no other owner may get the key within it), then calls done if not nil
// with the number of holds the store said the token did not have.
func (c *Client) giveBack(key, token string, n int, ttl time.Duration, notBefore time.Time, done func(left int)) {
	wait := max(0, notBefore.Sub(c.cfg.clock.Now()))
	c.backgroundFor(wait+c.giveBackBound(ttl), func(ctx context.Context) {
		if wait > 0 {
			sleep(ctx, c.cfg.clock, wait, nil)
		}
		left := c.releaseN(ctx, key, token, n)
		if done != nil {
			done(left)
		}
	})
}

// giveBackNow releases up to n holds of token on key at once, one try
// each, bounded by releaseTimeout(ttl) and detached from ctx's
// cancellation, and leaves to the background give-back what the store did
// not answer.
func (c *Client) giveBackNow(ctx context.Context, key, token string, n int, ttl time.Duration) {
	rctx, cancel := releaseContext(ctx, ttl)
	defer cancel()
	for ; n > 0; n-- {
		err := classify(c.store.Release(rctx, key, token))
		if err == nil {
			continue
		}
		if isNotHeld(err) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
			return
		}
		break
	}
	if n > 0 {
		c.giveBack(key, token, n, ttl, time.Time{}, nil)
	}
}

// releaseN releases up to n holds of token on key, retrying a release that
// got no answer until ctx ends. It stops early when the store says the token
// holds nothing, or refuses in a way retrying cannot fix, and returns how
// many of the n it did not release.
func (c *Client) releaseN(ctx context.Context, key, token string, n int) int {
	for fails := 0; n > 0; {
		err := classify(c.store.Release(ctx, key, token))
		switch {
		case err == nil:
			n--
			fails = 0
			continue
		case isNotHeld(err), errors.Is(err, ErrInvalid), errors.Is(err, ErrRefused):
			return n
		}
		fails++
		if !sleep(ctx, c.cfg.clock, giveBackRetry(fails), nil) {
			return n
		}
	}
	return 0
}

// backgroundFor runs f in its own goroutine with a context of its own,
// bounded by d. Close waits for it, and cancels its context if Close's own
// ends first.
func (c *Client) backgroundFor(d time.Duration, f func(context.Context)) {
	c.life.bg.goCounted(func() {
		ctx, cancel := context.WithTimeout(c.life.abandonCtx, d)
		defer cancel()
		f(ctx)
	})
}
