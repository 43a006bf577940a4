package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitFor is the shared one (internal/testkit).
var waitFor = testkit.WaitFor

func waiters(t *testing.T, s *etcdstore.Store, key string) int {
	n, err := s.Waiters(context.Background(), key)
	if err != nil {
		t.Errorf("waiters: %v", err)
	}
	return n
}

// Waiters queued one after the other get the lock in that order, each with
// a fence above the last, across stores and tokens of one store.
func TestQueuedFIFO(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	holder, _ := newStore(t, c, pfx, 0)
	shared, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	h := tok()
	g0, err := holder.Acquire(ctx, "q", h, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	type result struct {
		i   int
		g   driver.Grant
		err error
		tok string
		s   *etcdstore.Store
	}
	got := make(chan result, n)
	for i := range n {
		s := shared
		if i%2 == 0 {
			s, _ = newStore(t, c, pfx, 0)
		}
		w := tok()
		go func() {
			g, err := s.AcquireQueued(ctx, "q", w, time.Second)
			got <- result{i, g, err, w, s}
		}()
		waitFor(t, 5*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool { return waiters(t, holder, "q") == i+1 })
	}
	if err := holder.Release(ctx, "q", h); err != nil {
		t.Fatal(err)
	}
	last := g0.Fence
	for want := range n {
		r := <-got
		if r.err != nil || r.i != want {
			t.Fatalf("grant %d went to waiter %d (err %v)", want, r.i, r.err)
		}
		if r.g.Fence <= last || r.g.Holds != 1 {
			t.Fatalf("waiter %d: grant %+v after fence %d", r.i, r.g, last)
		}
		last = r.g.Fence
		if info, _ := r.s.Inspect(ctx, "q"); info.Fence != r.g.Fence || info.Token != r.tok {
			t.Fatalf("waiter %d granted but inspect says %+v", r.i, info)
		}
		if err := r.s.Release(ctx, "q", r.tok); err != nil {
			t.Fatal(err)
		}
	}
}

// A waiter whose context ends leaves nothing in the store, and the queue
// behind it moves on.
func TestQueuedCancelLeavesNothing(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	h := tok()
	if _, err := s.Acquire(ctx, "q", h, time.Second); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.AcquireQueued(wctx, "q", tok(), time.Second)
		done <- err
	}()
	waitFor(t, 5*time.Second, "waiter queued", func() bool { return waiters(t, s, "q") == 1 })
	// A second waiter behind the cancelled one must still be served.
	later := make(chan error, 1)
	w2 := tok()
	go func() {
		_, err := s.AcquireQueued(ctx, "q", w2, time.Second)
		later <- err
	}()
	waitFor(t, 5*time.Second, "second waiter queued", func() bool { return waiters(t, s, "q") == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if n := waiters(t, s, "q"); n != 1 {
		t.Fatalf("after cancel: %d waiters, want 1", n)
	}
	if err := s.Release(ctx, "q", h); err != nil {
		t.Fatal(err)
	}
	if err := <-later; err != nil {
		t.Fatalf("second waiter: %v", err)
	}
	if err := s.Release(ctx, "q", w2); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys left: %v, %v", resp.Count, err)
	}
}

// A waiter whose session expires stops waiting with an error (etcd
// #19597), although the holder keeps the lock.
func TestQueuedSessionExpiry(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	holder, admin := newStore(t, c, pfx, 0)
	waiter, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	if _, err := holder.Acquire(ctx, "q", tok(), time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := waiter.AcquireQueued(ctx, "q", tok(), time.Second)
		done <- err
	}()
	waitFor(t, 5*time.Second, "waiter queued", func() bool { return waiters(t, holder, "q") == 1 })
	// Expire the waiter's session as the server would: revoke its lease.
	resp, err := admin.Get(ctx, pfx+"q/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("waiter after its session expired: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter kept waiting after its session expired")
	}
	// The next acquisition of that store starts a new session.
	w := tok()
	if _, err := waiter.AcquireQueued(ctxT(t, time.Second), "q", w, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("new session's waiter: %v", err)
	}
}
