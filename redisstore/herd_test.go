package redisstore_test

import (
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
	"example.com/dlock/redisstore"
)

// TestReleaseWakesOneWaiterPerStore counts the scripts Redis runs per
// hand-over (INFO commandstats: independent of load) when n waiters, each
// a Client of its own, wait for one key and each holds it for a moment
// once granted. On one Store (one process) a release wakes the first
// waiter only: a hand-over costs the release, the acquisition and the
// next waiter's contended attempt, 3 at most. Control: the same waiters
// on a Store each (n processes) are each woken by every release and each
// retry, about half the waiters per hand-over.
func TestReleaseWakesOneWaiterPerStore(t *testing.T) {
	const n = 30
	_, rdb := newRedis(t)
	shared := newStore(t, rdb)
	for _, tc := range []struct {
		name     string
		store    func() *redisstore.Store
		min, max float64 // scripts per hand-over
	}{
		{"one store", func() *redisstore.Store { return shared }, 1, 3 + 1.0/n},
		{"a store per waiter (control)", func() *redisstore.Store { return newStore(t, rdb) }, 7, n + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			per := redisHandOvers(t, rdb, n, tc.name, tc.store)
			t.Logf("%d waiters: %.2f scripts per hand-over", n, per)
			if per < tc.min || per > tc.max {
				t.Fatalf("%.2f scripts per hand-over, want %v to %v", per, tc.min, tc.max)
			}
		})
	}
}

// redisHandOvers queues n waiters (each a Client on store()) behind a
// holder of key, releases, and returns the scripts Redis ran per
// hand-over until the last waiter released.
func redisHandOvers(t *testing.T, rdb *redis.Client, n int, key string, store func() *redisstore.Store) float64 {
	ctx := testCtx(t)
	c := func() *dlock.Client { return clienttest.NewClient(t, store()) }
	warm := clienttest.MustLock(t, c(), ctx, key+"-warm") // load the lock and release scripts
	clienttest.Release(t, warm)
	l := clienttest.MustLock(t, c(), ctx, key, dlock.WithTTL(time.Minute))
	var wg sync.WaitGroup
	base := serverCalls(t, rdb)
	for range n {
		w := c()
		wg.Go(func() {
			lw, err := w.Lock(ctx, key, dlock.WithTTL(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			<-time.After(2 * time.Millisecond) // the critical section
			_ = lw.Release(ctx)
		})
	}
	// Each waiter tries, subscribes and tries again before it sleeps.
	testkit.WaitFor(t, 10*time.Second, "the waiters' two attempts", func() bool {
		return serverCalls(t, rdb) >= base+2*int64(n)
	})
	before := serverCalls(t, rdb)
	clienttest.Release(t, l)
	wg.Wait()
	return float64(serverCalls(t, rdb)-before) / float64(n)
}
