package dlock_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
)

// overlapWatch polls another client's TryLock on key until it acquires or
// limit passes, and counts overlaps: acquisitions made while the holder's
// lease still reported itself valid (Err nil, or the try started before
// its ValidUntil). It returns the overlaps and whether the key was acquired.
func overlapWatch(t *testing.T, other *dlock.Client, holder *dlock.Lease, key string, limit time.Duration) (overlaps int, acquired bool) {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		tryStart := time.Now()
		l, err := other.TryLock(ctx, key, dlock.WithTTL(time.Second))
		if err == nil {
			if herr := holder.Err(); herr == nil || tryStart.Before(holder.ValidUntil()) {
				overlaps++
				t.Logf("overlap: acquired while the holder reports Err=%v, %v of validity left at the try", herr, holder.ValidUntil().Sub(tryStart))
			}
			release(t, l)
			return overlaps, true
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock: %v", err)
		}
		<-time.After(5 * time.Millisecond)
	}
	return overlaps, false
}

// S1: an Extend shorter than the lease moves the lease's validity back to
// the expiry it set in the store, so no other client acquires while the
// holder believes it holds the lock.
func TestS1ExtendShorterMovesValidityBack(t *testing.T) {
	f := startRedis(t, true)
	holder, other := f.client(t, false, nil), f.client(t, false, nil)
	ctx := testCtx(t)
	l := mustLock(t, holder, ctx, "s1", dlock.WithTTL(10*time.Second))
	const short = 50 * time.Millisecond
	extStart := time.Now()
	if err := l.Extend(ctx, short); err != nil {
		t.Fatalf("Extend(%v): %v", short, err)
	}
	if got := l.ValidUntil().Sub(extStart); got > short {
		t.Fatalf("after Extend(%v) the lease is valid for %v more", short, got)
	}
	overlaps, acquired := overlapWatch(t, other, l, "s1", 2*time.Second)
	if overlaps != 0 {
		t.Fatalf("%d overlapping holders after Extend(%v)", overlaps, short)
	}
	if !acquired { // negative control: the key did expire in the store
		t.Fatalf("key still held 2s after Extend(%v)", short)
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("holder Err = %v, want ErrLost (ErrExpired)", err)
	}
}

// S1 variant: renewal uses the TTL the last Extend set, so it never shrinks
// the key back to the lease's original TTL. Cut off from the store after a
// renewal, the holder keeps the lock until its own validity ends, and not
// a moment longer.
func TestS1RenewalKeepsTTLSetByExtend(t *testing.T) {
	f := startRedis(t, true)
	hook := newExtendHook("")
	holder := f.client(t, true, hook)
	other := f.client(t, false, nil)
	ctx := testCtx(t)
	const lease, longer = 300 * time.Millisecond, 2 * time.Second
	l := mustLock(t, holder, ctx, "s1r", dlock.WithAutoRenew(lease))
	if err := l.Extend(ctx, longer); err != nil {
		t.Fatalf("Extend(%v): %v", longer, err)
	}
	n := hook.extends.Load()
	waitFor(t, 3*time.Second, 5*time.Millisecond, "a renewal after Extend", func() bool { return hook.extends.Load() > n })
	// A renewal's store call may still be under way; wait until it settled
	// (the validity moved past the Extend's) so that it cannot land after
	// the blackhole.
	waitFor(t, time.Second, time.Millisecond, "the renewal settled", func() bool {
		return l.Remaining() > longer-lease || l.Err() != nil
	})
	f.proxy.Blackhole(faultproxy.Upstream, true)
	f.proxy.Blackhole(faultproxy.Downstream, true)
	overlaps, acquired := overlapWatch(t, other, l, "s1r", 2*longer)
	if overlaps != 0 {
		t.Fatalf("%d overlapping holders: renewal shrank the key below the lease's validity", overlaps)
	}
	if !acquired {
		t.Fatalf("key still held %v after the holder was cut off", 2*longer)
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("holder Err = %v, want ErrLost after failed renewals", err)
	}
}
