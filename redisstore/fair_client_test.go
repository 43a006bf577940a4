package redisstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/testkit"
)

// TestFairClientsServedInOrder: dlock Clients on fair stores (one per
// process) wait in the store's queue, and get the key in the order they
// asked for it, each with a greater fence. The conformance case
// QueuerServesInOrder checks the same of the store itself, with its LIFO
// mutant as control.
func TestFairClientsServedInOrder(t *testing.T) {
	_, rdb := newRedis(t)
	ctx := testCtx(t)
	probe := newFairStore(t, rdb, nil)
	clientOn := func() *dlock.Client {
		c, err := dlock.New(newFairStore(t, otherClient(t, rdb), nil), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, c)
		return c
	}
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
		go func() {
			l, err := c.Lock(ctx, "k")
			got <- turn{i, l, err}
		}()
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
			t.Fatalf("turn %d: nobody got the key", want)
		}
		if r.err != nil || r.i != want || r.l.Fence() <= last {
			t.Fatalf("turn %d went to waiter %d (%v); want waiter %d with a fence above %d", want, r.i, r.err, want, last)
		}
		last = r.l.Fence()
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
