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

// An Extend applied by the store whose reply comes after the lease's
// local validity reports the loss, and Release of the lost lease still
// frees the key the late extension kept held. (Was the root package's
// TestL3ExtendReportsLossAndReleaseFreesKey, review item L3.)
func TestLateExtendReplyReportsLossAndReleaseFreesKey(t *testing.T) {
	f := startRedis(t, true)
	holder, other := f.client(t, true, nil), f.client(t, false, nil)
	ctx := testkit.Ctx(t)
	// Load the extend script first: a NOSCRIPT round trip under the delay
	// would land the extension after the key expired.
	w := clienttest.MustLock(t, holder, ctx, "l3-warm", dlock.WithTTL(time.Second))
	if err := w.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	clienttest.Release(t, w)
	// The lease must last until the Extend reaches the server (a 100 ms
	// one ran out first at load 8-19), and the reply must come after the
	// lease's local validity, whatever part of it is left.
	const lease = 500 * time.Millisecond
	l := clienttest.MustLock(t, holder, ctx, "l3", dlock.WithTTL(lease))
	// The request reaches the server at once; its reply, late.
	f.proxy.SetDelay(faultproxy.Downstream, lease+300*time.Millisecond)
	err := l.Extend(ctx, 5*time.Second)
	eerr := err
	f.proxy.SetDelay(faultproxy.Downstream, 0)
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Extend whose reply came after the validity = %v, want ErrLost (lease Err = %v)", err, l.Err())
	}
	// Negative control: the extension was applied, the key is held.
	if _, err := other.TryLock(ctx, "l3"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("key free before Release (TryLock = %v): the extension was not applied (Extend said %v)", err, eerr)
	}
	if err := l.Release(ctx); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Release of a lost lease = %v, want ErrLost", err)
	}
	l2, err := other.TryLock(ctx, "l3")
	if err != nil {
		t.Fatalf("key still held after Release of the lost lease: %v", err)
	}
	clienttest.Release(t, l2)
}
