package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

// The eviction bound of the fair store: a waiter whose process died (its
// client closed: no renewal, no leave) keeps its place at most one waiter
// lease after its last renewal, and dead waiters in a row are evicted
// together, not one lease after the other (Redisson's RFairLock chains
// them: each deadline is its predecessor's plus the wait, 5 min each).

// evictionLease is the waiter lease of these tests; evictionLimit is the
// bound on the time from the kill to the first live waiter's grant: the
// dead waiters' lease, plus one renewal period of the live ones (who run the
// eviction), plus slack for a loaded machine.
const (
	evictionLease = time.Second
	evictionLimit = evictionLease + evictionLease/3 + 700*time.Millisecond
)

func TestFairDeadWaiterIsEvictedWithinItsLease(t *testing.T) {
	srv, _ := newRedis(t)
	el, err := deadWaiters(t, srv, 1, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1 dead waiter (lease %v): the next waiter got the key %v after the kill (limit %v)", evictionLease, el, evictionLimit)
}

func TestFairDeadWaitersInARowAreNotChained(t *testing.T) {
	srv, _ := newRedis(t)
	el, err := deadWaiters(t, srv, 5, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("5 dead waiters in a row (lease %v each): the next waiter got the key %v after the kill (limit %v; chained would be >= %v)",
		evictionLease, el, evictionLimit, 5*evictionLease)
}

// TestFairNeverEvictingFailsTheBound is the negative control: with a
// script that never evicts, the live waiters behind a dead one do not get
// the key within the bound.
func TestFairNeverEvictingFailsTheBound(t *testing.T) {
	srv, _ := newRedis(t)
	if el, err := deadWaiters(t, srv, 1, 2, redisstore.NeverEvict); err == nil {
		t.Fatalf("a store that never evicts served the waiter behind a dead one %v after the kill", el)
	}
}

// TestFairChainedDeadlinesFailTheBound is the negative control of the
// not-chained bound: with deadlines counted from the waiter ahead (as
// Redisson's), five dead waiters in a row hold the next one up for about
// five waiter leases.
func TestFairChainedDeadlinesFailTheBound(t *testing.T) {
	srv, _ := newRedis(t)
	if el, err := deadWaiters(t, srv, 5, 1, redisstore.ChainDeadlines); err == nil {
		t.Fatalf("chained deadlines served the waiter behind five dead ones %v after the kill", el)
	} else {
		t.Log(err)
	}
}

type fairOutcome struct {
	i   int
	g   driver.Grant
	err error
}

// deadWaiters queues dead and then live waiters, each on a client and store
// of its own, behind a holder; closes the dead ones' clients, releases the
// key and measures how long after the kill the first live waiter got it.
// It returns an error if that took longer than evictionLimit, and checks
// that the live waiters are served in order with increasing fences.
func deadWaiters(t *testing.T, srv *redisserver.Server, dead, live int, mutate func(*redisstore.FairStore)) (time.Duration, error) {
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	key := fmt.Sprintf("fair-%d-%d", dead, live)
	probe, _ := fairOn(t, srv, mutate)
	holder := "holder"
	if _, err := probe.Acquire(ctx, key, holder, time.Minute); err != nil {
		t.Fatal(err)
	}
	n := dead + live
	rdbs, stores, out := make([]*redis.Client, n), make([]*redisstore.FairStore, n), make(chan fairOutcome, n)
	for i := range n {
		stores[i], rdbs[i] = fairOn(t, srv, mutate)
		wg.Go(func() {
			g, err := stores[i].AcquireQueued(ctx, key, fmt.Sprint("w", i), time.Minute)
			out <- fairOutcome{i, g, err}
		})
		testkit.WaitFor(t, 5*time.Second, "waiter queued", func() bool { w, _ := probe.Waiters(ctx, key); return w == i+1 })
	}
	killed := time.Now()
	for i := range dead {
		_ = rdbs[i].Close() // a crash: no renewal, and its leave fails
	}
	if err := probe.Release(ctx, key, holder); err != nil {
		t.Fatal(err)
	}
	var last uint64
	first := time.Duration(0)
	for want := dead; want < n; want++ {
		r, ok := nextLive(out, dead, evictionLimit+time.Duration(want-dead)*5*time.Second)
		switch {
		case !ok && want == dead:
			return time.Since(killed), fmt.Errorf("no live waiter got the key within %v of the kill of %d dead waiters", evictionLimit, dead)
		case !ok || r.err != nil || r.i != want || r.g.Fence <= last:
			t.Fatalf("turn of waiter %d: got waiter %d, %+v, %v (fence must exceed %d)", want, r.i, r.g, r.err, last)
		case want == dead:
			first = time.Since(killed)
		}
		last = r.g.Fence
		if err := stores[r.i].Release(ctx, key, fmt.Sprint("w", r.i)); err != nil {
			t.Fatal(err)
		}
	}
	if first > evictionLimit {
		return first, fmt.Errorf("the first live waiter got the key %v after the kill of %d dead waiters, limit %v", first, dead, evictionLimit)
	}
	return first, nil
}

// nextLive returns the next outcome of a live waiter (index >= dead),
// skipping the dead ones' errors, or false after d.
func nextLive(out <-chan fairOutcome, dead int, d time.Duration) (fairOutcome, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case r := <-out:
			if r.i >= dead {
				return r, true
			}
		case <-timer.C:
			return fairOutcome{}, false
		}
	}
}

// fairOn returns a fair store with evictionLease on a client of its own
// (another process), mutated by mutate if not nil, and that client.
func fairOn(t *testing.T, srv *redisserver.Server, mutate func(*redisstore.FairStore)) (*redisstore.FairStore, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFairStore(t, rdb, &redisstore.Options{WaiterLease: evictionLease})
	if mutate != nil {
		mutate(f)
	}
	return f, rdb
}
