package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
)

// Local waiters queue in the process: while one holds the key, the others
// make no store call, and each release is followed by exactly one acquire.
func TestLocalWaitersCostNoRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fs := newClient(t)
		ctx := testCtx(t)
		const n = 20
		l := mustLock(t, c, ctx, "k")
		var wg sync.WaitGroup
		got := make(chan *dlock.Lease)
		for range n {
			wg.Go(func() {
				lw, err := c.Lock(ctx, "k")
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				got <- lw
			})
		}
		// No waiter may reach the store while the key is held locally: once
		// every waiter is blocked (synctest.Wait), none has called it.
		synctest.Wait()
		if calls := fs.calls.Load(); calls != 1 {
			t.Fatalf("store calls while held = %d, want 1 (the holder's acquire)", calls)
		}
		release(t, l)
		for range n {
			release(t, <-got)
		}
		wg.Wait()
		// One acquire and one release per holding (calls counts both, and
		// leases of the default 30 s are not renewed here): nothing wasted.
		if calls, rel := fs.calls.Load(), fs.released.Load(); calls != 2*(n+1) || rel != n+1 {
			t.Fatalf("store calls = %d, releases = %d, want %d and %d", calls, rel, 2*(n+1), n+1)
		}
	})
}

// A waiter whose context ends while queued leaves the queue and does not
// block the ones behind it; a later release still reaches them.
func TestCancelWhileQueued(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	l := mustLock(t, c, ctx, "k")
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	// First in line: it gives up.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Lock(short, "k")
		errc <- err
	}()
	if err := <-errc; !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled queued Lock = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	// A wait bound works the same way in the queue.
	if _, err := c.Lock(ctx, "k", dlock.WithWait(20*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("bounded queued Lock = %v, want ErrNotAcquired", err)
	}
	next := make(chan *dlock.Lease, 1)
	go func() {
		lw, err := c.Lock(ctx, "k")
		if err != nil {
			t.Errorf("Lock after cancelled waiter: %v", err)
		}
		next <- lw
	}()
	release(t, l)
	select {
	case lw := <-next:
		if lw != nil {
			release(t, lw)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter behind a cancelled one never got the lock")
	}
}

// An owner that holds the key re-enters without queueing behind local
// waiters (who wait for its release): no self-deadlock.
func TestReentryBypassesLocalQueue(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	owner := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	outer := mustLock(t, c, owner, "k")
	waiting := make(chan *dlock.Lease, 1)
	go func() {
		lw, err := c.Lock(ctx, "k")
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		waiting <- lw
	}()
	inCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Lock(inCtx, "k", dlock.WithWait(300*time.Millisecond)); err == nil {
		// Without an owner in the context this is a new owner: it must wait.
		t.Fatal("a plain Lock acquired a key held by another owner")
	}
	inner := mustLock(t, c, owner, "k")
	if inner.Holds() != 2 || inner.Fence() != outer.Fence() {
		t.Fatalf("re-entry: holds %d fence %d, want 2 and %d", inner.Holds(), inner.Fence(), outer.Fence())
	}
	release(t, inner)
	release(t, outer)
	if lw := <-waiting; lw != nil {
		if lw.Fence() <= outer.Fence() {
			t.Errorf("next holder fence %d, want > %d", lw.Fence(), outer.Fence())
		}
		release(t, lw)
	}
}

// Every local succession is a new holding with a strictly greater fence.
func TestLocalSuccessionsGetNewFences(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	var mu sync.Mutex
	var fences []uint64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				err := c.Do(ctx, "k", func(ctx context.Context) error {
					l, err := c.Lock(ctx, "k") // re-entry: same fence
					if err != nil {
						return err
					}
					mu.Lock()
					fences = append(fences, l.Fence())
					mu.Unlock()
					return l.Release(ctx)
				})
				if err != nil {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d after %d: not strictly increasing", fences[i], fences[i-1])
		}
	}
	if len(fences) != 40 {
		t.Fatalf("%d holdings, want 40", len(fences))
	}
}
