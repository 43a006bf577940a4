package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
)

// TestSemaphoresWaitOnEtcd: dlock.Semaphores on etcd: a waiter for the only
// permit gets it once the holder releases (woken by the watch), with a
// greater fence, and not before: TryAcquire is refused while it is held.
func TestSemaphoresWaitOnEtcd(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	ctx := ctxT(t, 30*time.Second)
	var sems []*dlock.Semaphores
	for range 2 {
		s, _ := newStore(t, c, pfx, 5*time.Second)
		ss, err := dlock.NewSemaphores(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close(ctx) })
		sems = append(sems, ss)
	}
	p, err := sems[0].Acquire(ctx, "jobs", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sems[1].TryAcquire(ctx, "jobs", 1, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held permit: %v, want ErrNotAcquired", err)
	}
	got := make(chan *dlock.Permit, 1)
	go func() {
		q, err := sems[1].Acquire(ctx, "jobs", 1, 1)
		if err != nil {
			t.Errorf("the waiter's Acquire: %v", err)
		}
		got <- q
	}()
	select {
	case <-got:
		t.Fatal("the waiter got the permit while it was held")
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q := <-got
	if q == nil {
		return
	}
	t.Logf("the waiter got the permit %v after the release", time.Since(start))
	if q.Fence() <= p.Fence() {
		t.Fatalf("the waiter's fence %d is not above the holder's %d", q.Fence(), p.Fence())
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
