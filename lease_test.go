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

func TestFixedTTLLeaseSignalsExpiryFromLocalClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t)
		const ttl = 100 * time.Millisecond
		start := time.Now()
		l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(ttl))
		// The signal is scheduled before the lease ends on the store's side
		// (validity = TTL minus elapsed time and drift), exactly...
		vu := l.ValidUntil()
		if !vu.Before(start.Add(ttl)) {
			t.Fatalf("ValidUntil %v after start is not before the %v lease", vu.Sub(start), ttl)
		}
		within(t, l.Done(), ttl+500*time.Millisecond, "lost signal")
		// ...and fires at that point less the expiry margin (5 ms): exactly, on
		// the bubble's clock (TestDoneClosedByValidUntil checks the margin).
		if d := vu.Sub(time.Now()); d != 5*time.Millisecond {
			t.Fatalf("lost signal %v before ValidUntil, want the 5ms margin", d)
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
			t.Fatalf("Err = %v, want ErrLost with cause ErrExpired", err)
		}
		if err := l.Release(testCtx(t)); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Release after loss = %v, want ErrLost", err)
		}
		if l.Remaining() != 0 {
			t.Fatal("a lost lease reports remaining validity")
		}
	})
}

func TestAutoRenewKeepsLongJobsLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t)
		const lease = 300 * time.Millisecond
		l := mustLock(t, c, testCtx(t), "k", dlock.WithAutoRenew(lease))
		time.Sleep(4 * lease) // a job several leases long: the point of the test
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost while renewing: %v", err)
		}
		if _, err := c.TryLock(testCtx(t), "k"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("another owner acquired a renewed lock: %v", err)
		}
		release(t, l)
	})
}

func TestRenewalFailureFiresLostBeforeValidityEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fs := newClient(t)
		const lease = 150 * time.Millisecond
		l := mustLock(t, c, testCtx(t), "k", dlock.WithAutoRenew(lease))
		fs.failExt.Store(true)
		validUntil := l.ValidUntil()
		within(t, l.Done(), 2*lease, "lost signal")
		if now := time.Now(); now.After(validUntil) { // the bubble's clock: no slack for a late timer
			t.Fatalf("lost signal %v after validity ended", now.Sub(validUntil))
		}
		err := l.Err()
		if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, dlock.ErrExpired) {
			t.Fatalf("Err = %v, want ErrLost caused by expiry after ErrUnavailable", err)
		}
	})
}

func TestTakenLockIsReportedLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fs := newClient(t)
		const lease = 60 * time.Millisecond
		l := mustLock(t, c, testCtx(t), "k", dlock.WithAutoRenew(lease))
		// Behind the holder's back: the key vanishes and another owner takes it.
		if err := fs.Mutex.Release(testCtx(t), "k", l.Token()); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Mutex.Acquire(testCtx(t), "k", "intruder", time.Minute); err != nil {
			t.Fatal(err)
		}
		within(t, l.Done(), lease, "lost signal")
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("Err = %v, want ErrLost caused by ErrTaken", err)
		}
	})
}

func TestReleaseTwiceAndNilLease(t *testing.T) {
	c, _ := newClient(t)
	l := mustLock(t, c, testCtx(t), "k")
	release(t, l)
	if err := l.Release(testCtx(t)); !errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost) {
		t.Fatalf("second Release = %v, want ErrNotHeld only", err)
	}
	var nilLease *dlock.Lease
	if err := nilLease.Release(testCtx(t)); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("nil lease Release = %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is not closed after Release")
	}
}

func TestReentryThroughOwnerContext(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	err := c.Do(ctx, "k", func(ctx context.Context) error {
		inner := mustLock(t, c, ctx, "k") // same owner: re-enters instead of deadlocking
		if inner.Holds() != 2 {
			t.Errorf("inner holds = %d, want 2", inner.Holds())
		}
		release(t, inner)
		if _, err := c.TryLock(context.Background(), "k"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("lock free while the outer hold remains: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, c, ctx, "k") // fully released
	release(t, l)
}

func TestReentryKeepsFenceAndNewHoldingsIncreaseIt(t *testing.T) {
	c, _ := newClient(t)
	owner := dlock.NewOwner()
	ctx := dlock.ContextWithOwner(testCtx(t), owner)
	a := mustLock(t, c, ctx, "k")
	b := mustLock(t, c, ctx, "k")
	if a.Fence() != b.Fence() || b.Holds() != 2 {
		t.Fatalf("re-entry: fences %d/%d, holds %d", a.Fence(), b.Fence(), b.Holds())
	}
	release(t, b)
	release(t, a)
	n := mustLock(t, c, testCtx(t), "k")
	defer release(t, n)
	if n.Fence() <= a.Fence() {
		t.Fatalf("new holding fence %d, want > %d", n.Fence(), a.Fence())
	}
}

func TestDoCancelsContextWhenLockIsLost(t *testing.T) {
	c, _ := newClient(t)
	err := c.Do(testCtx(t), "k", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), dlock.ErrLost) {
				t.Errorf("cause = %v, want ErrLost", context.Cause(ctx))
			}
			return ctx.Err()
		case <-time.After(2 * time.Second):
			return errors.New("context not cancelled")
		}
	}, dlock.WithTTL(50*time.Millisecond))
	if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want ErrLost joined with fn's error", err)
	}
}

func TestDoReturnsLossEvenIfFnSucceeded(t *testing.T) {
	c, _ := newClient(t)
	err := c.Do(testCtx(t), "k", func(ctx context.Context) error {
		<-ctx.Done() // a job that outlives its fixed lease but reports success
		return nil
	}, dlock.WithTTL(30*time.Millisecond))
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Do = %v, want ErrLost", err)
	}
}

func TestLateGrantIsDiscardedAndReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fs := newClient(t)
		const ttl = 50 * time.Millisecond
		fs.acqDelay.Store(int64(ttl)) // the reply arrives when the lease is already over
		l, err := c.TryLock(testCtx(t), "k", dlock.WithTTL(ttl))
		if l != nil || !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("late grant: lease %v, err %v", l, err)
		}
		if err := c.Close(testCtx(t)); err != nil { // waits for the give-back
			t.Fatal(err)
		}
		if fs.released.Load() != 1 {
			t.Fatalf("late grant released %d times, want 1", fs.released.Load())
		}
	})
}

func TestConcurrentLeaseUseIsSafe(t *testing.T) {
	c, _ := newClient(t)
	l := mustLock(t, c, testCtx(t), "k", dlock.WithAutoRenew(30*time.Millisecond))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_ = l.Remaining()
				_ = l.ValidUntil()
				_ = l.Err()
				_ = l.Extend(context.Background(), 30*time.Millisecond)
			}
			_ = l.Release(context.Background())
		}()
	}
	wg.Wait()
	if !errors.Is(l.Err(), dlock.ErrNotHeld) {
		t.Fatalf("Err = %v after concurrent releases", l.Err())
	}
}
