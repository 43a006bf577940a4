package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

// TestFairClientsServedInOrder: dlock Clients on fair stores (one per
// process) wait in the store's queue, and get the key in the order they
// asked for it, each with a greater fence.
func TestFairClientsServedInOrder(t *testing.T) {
	_, rdb := newRedis(t)
	if err := servedInOrder(t, rdb, nil); err != nil {
		t.Fatal(err)
	}
}

// TestFairLIFOQueueFailsTheOrder is the negative control: with a queue that
// puts each new waiter at the head, the Clients are not served in order.
func TestFairLIFOQueueFailsTheOrder(t *testing.T) {
	_, rdb := newRedis(t)
	if err := servedInOrder(t, rdb, redisstore.LIFOQueue); err == nil {
		t.Fatal("a LIFO queue served the Clients in the order they asked")
	}
}

// servedInOrder queues three Clients, each on a fair store of its own
// (mutated by mutate if not nil), one after the other behind a holder, and
// reports whether they got the key in that order with increasing fences.
func servedInOrder(t *testing.T, rdb *redis.Client, mutate func(*redisstore.FairStore)) error {
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	probe := newFairStore(t, rdb, nil)
	clientOn := func() *dlock.Client { return fairClientOn(t, rdb, mutate) }
	first, err := clientOn().Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	type turn struct {
		i   int
		l   *dlock.Lease
		err error
	}
	got := make(chan turn, n)
	for i := range n {
		c := clientOn()
		wg.Go(func() {
			l, err := c.Lock(ctx, "k")
			got <- turn{i, l, err}
		})
		testkit.WaitFor(t, 5*time.Second, "waiter queued", func() bool { w, _ := probe.Waiters(ctx, "k"); return w == i+1 })
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	last := first.Fence()
	for want := range n {
		var r turn
		select {
		case r = <-got:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("turn %d: nobody got the key", want)
		}
		if r.err != nil || r.i != want || r.l.Fence() <= last {
			if r.l != nil {
				_ = r.l.Release(ctx)
			}
			return fmt.Errorf("turn %d went to waiter %d (%v); want waiter %d with a fence above %d", want, r.i, r.err, want, last)
		}
		last = r.l.Fence()
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

// fairClientOn returns a Client with a fixed one-minute lease on a fair
// store of its own (mutated by mutate if not nil) over a new client of
// rdb's server.
func fairClientOn(t *testing.T, rdb *redis.Client, mutate func(*redisstore.FairStore)) *dlock.Client {
	f := newFairStore(t, otherClient(t, rdb), nil)
	if mutate != nil {
		mutate(f)
	}
	c, err := dlock.New(f, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	return c
}
