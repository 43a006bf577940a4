package chaos_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/redisstore"
)

// Regression test for a bug this suite found: Lock retried an acquisition
// whose reply timed out with the same token; when the lost attempt had been
// applied, the retry re-entered the caller's own ghost hold (Holds()==2) and
// Release left the key held until its TTL. The client now gives ghost holds
// of a fresh token back.
func TestLockRetryDropsOwnGhostGrant(t *testing.T) {
	srv, direct := newRedis(t)
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	opts := clientOptions(proxy.Addr())
	opts.ReadTimeout = 200 * time.Millisecond
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := testCtx(t, time.Minute)
	s, _ := redisstore.New(rdb, nil)
	defer s.Close()
	inspect, _ := redisstore.New(direct, nil)
	if _, err := inspect.Inspect(ctx, lockKey); err != nil { // loads nothing; warms the direct client
		t.Fatal(err)
	}
	locks, _ := dlock.New(s)
	if l, err := locks.TryLock(ctx, "warmup", dlock.WithTTL(time.Second)); err == nil { // load scripts
		_ = l.Release(ctx)
	}
	release := proxy.Hold(faultproxy.Downstream)
	type result struct {
		l   *dlock.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := locks.Lock(ctx, lockKey, dlock.WithTTL(5*time.Second), dlock.WithWait(5*time.Second))
		done <- result{l, err}
	}()
	if !poll(5*time.Second, func() bool { i, err := inspect.Inspect(ctx, lockKey); return err == nil && i.Held }) {
		t.Fatal("first attempt never reached the server")
	}
	time.Sleep(opts.ReadTimeout + 100*time.Millisecond) // let the client's read time out
	release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	holds := r.l.Holds()
	_ = r.l.Release(ctx)
	i, _ := inspect.Inspect(ctx, lockKey)
	if holds != 1 || i.Held {
		t.Fatalf("a first acquisition returned Holds()=%d; after its Release the key is still held=%v (holds %d, %v left)", holds, i.Held, i.Holds, i.Remaining)
	}
}
