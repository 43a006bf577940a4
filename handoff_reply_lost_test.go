package dlock_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
)

// L2: a local handoff whose reply is lost (the releasing holder's context
// ends first) was applied in the store, under a token nobody has. The
// intended recipient must still get the key within its wait bound, far
// shorter than the TTL.
func TestL2TimedOutHandoffFreesTheKey(t *testing.T) {
	e := startRedis(t, true)
	c := redisClient(t, e.addr())
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	a := mustLock(t, c, ctx, "L2", dlock.WithTTL(ttl))

	type result struct {
		l   *dlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Lock(ctx, "L2", dlock.WithTTL(ttl), dlock.WithWait(3*time.Second))
		got <- result{l, err}
	}()
	if ok, _ := pollUntil(5*time.Second, func() bool { return dlock.QueuedWaiters(c, "L2") == 1 }); !ok {
		t.Fatal("the waiter never queued")
	}

	resume := e.proxy.Hold(faultproxy.Downstream) // the transfer lands; its reply waits
	rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := a.Release(rctx)
	cancel()
	resume()
	if err == nil {
		t.Fatal("Release returned nil although its reply was held past its context")
	}
	t.Logf("Release with the reply held: %v", err)

	start := time.Now()
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter after a timed-out handoff: %v (the key stayed under a token nobody has)", r.err)
	}
	t.Logf("the waiter acquired %v after the reply was let through", time.Since(start).Round(time.Millisecond))
	release(t, r.l)
}
