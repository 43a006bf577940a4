package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// Renewal uses the TTL the last Extend set, so it never shrinks
// the key back to the lease's original TTL. Cut off from the store after a
// renewal, the holder keeps the lock until its own validity ends, and not
// a moment longer. (Was the root package's TestS1RenewalKeepsTTLSetByExtend,
// review item S1.)
func TestRenewalKeepsTTLSetByExtend(t *testing.T) {
	f := startRedis(t, true)
	hook := clienttest.NewExtendHook(nil, "")
	holder := f.client(t, true, hook)
	other := f.client(t, false, nil)
	ctx := testkit.Ctx(t)
	const lease, longer = 300 * time.Millisecond, 2 * time.Second
	l := clienttest.MustLock(t, holder, ctx, "s1r", dlock.WithAutoRenew(lease))
	if err := l.Extend(ctx, longer); err != nil {
		t.Fatalf("Extend(%v): %v", longer, err)
	}
	n := hook.Extends.Load()
	testkit.WaitFor(t, 3*time.Second, "a renewal after Extend", func() bool { return hook.Extends.Load() > n })
	// A renewal's store call may still be under way; wait until it settled
	// (the validity moved past the Extend's) so that it cannot land after
	// the blackhole.
	testkit.WaitFor(t, time.Second, "the renewal settled", func() bool {
		return l.Remaining() > longer-lease || l.Err() != nil
	})
	f.proxy.Blackhole(faultproxy.Upstream, true)
	f.proxy.Blackhole(faultproxy.Downstream, true)
	overlaps, acquired := clienttest.OverlapWatch(t, other, l, "s1r", 2*longer)
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
