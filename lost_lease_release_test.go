package dlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/memstore"
)

// L3: an Extend applied by the store whose reply comes after the lease's
// local validity reports the loss, and Release of the lost lease still
// frees the key the late extension kept held.
func TestL3ExtendReportsLossAndReleaseFreesKey(t *testing.T) {
	f := startRedis(t, true)
	holder, other := f.client(t, true, nil), f.client(t, false, nil)
	ctx := testCtx(t)
	// Load the extend script first: a NOSCRIPT round trip under the delay
	// would land the extension after the key expired.
	w := mustLock(t, holder, ctx, "l3-warm", dlock.WithTTL(time.Second))
	if err := w.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	release(t, w)
	l := mustLock(t, holder, ctx, "l3", dlock.WithTTL(100*time.Millisecond))
	// The request reaches the server at once; its reply, late.
	f.proxy.SetDelay(faultproxy.Downstream, 300*time.Millisecond)
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
	release(t, l2)
}

// L3, and a lost lease hands nothing on: its Release sends one
// token-checked release however often it is called, and a local waiter
// acquires from the store rather than by handoff.
func TestL3ReleaseOfLostLeaseSendsOneRelease(t *testing.T) {
	c, fs := newClient(t)
	l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(30*time.Millisecond))
	within(t, l.Done(), time.Second, "lost signal")
	for range 3 {
		if err := l.Release(testCtx(t)); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Release of a lost lease = %v, want ErrLost", err)
		}
	}
	if n := fs.released.Load(); n != 1 {
		t.Fatalf("%d releases sent for a lost lease, want 1", n)
	}
}

// L3 with concurrent Releases of one lost lease: still one release sent.
func TestL3ConcurrentReleasesOfLostLease(t *testing.T) {
	c, fs := newClient(t)
	l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(30*time.Millisecond))
	within(t, l.Done(), time.Second, "lost signal")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = l.Release(testCtx(t)) })
	}
	wg.Wait()
	if n := fs.released.Load(); n != 1 {
		t.Fatalf("%d releases sent for a lost lease, want 1", n)
	}
}

// L3 for an explicit Owner: the lost lease's hold is given back (the owner
// had no other live holding of the key), and never from under a newer
// holding of the same owner, which shares the owner's token: the new
// acquisition waits for a give-back under way, or the give-back waits for
// the newer holding's end. Negative control: once both ended the key is
// free, so the "held" check can fail.
func TestL3LostOwnerLeaseNeverStripsTheNewerHolding(t *testing.T) {
	c, fs := newClient(t)
	ctx := dlock.ContextWithOwner(testCtx(t), dlock.NewOwner())
	old := mustLock(t, c, ctx, "k", dlock.WithTTL(30*time.Millisecond))
	within(t, old.Done(), time.Second, "lost signal")
	renewed := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute)) // the owner's new holding
	if err := old.Release(testCtx(t)); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Release of the lost lease = %v, want ErrLost", err)
	}
	// The give-back ran before the new acquisition, or (if the loss was
	// still being settled when it started) waits for the newer holding's
	// end: either way the key stays held until then.
	if info, err := fs.Mutex.(*memstore.Store).Inspect(testCtx(t), "k"); err != nil || !info.Held {
		t.Fatalf("store after the lost lease's Release: %+v, %v; want held by the newer holding", info, err)
	}
	if err := renewed.Extend(testCtx(t), time.Minute); err != nil {
		t.Fatalf("the newer holding after the lost lease's Release: Extend = %v", err)
	}
	if err := renewed.Release(testCtx(t)); err != nil {
		t.Fatalf("Release of the newer holding = %v", err)
	}
	if err := c.Close(testCtx(t)); err != nil { // waits for a give-back under way
		t.Fatal(err)
	}
	if info, err := fs.Mutex.(*memstore.Store).Inspect(testCtx(t), "k"); err != nil || info.Held {
		t.Fatalf("store after both releases: %+v, %v; want free", info, err)
	}
	if n := fs.released.Load(); n != 2 {
		t.Fatalf("%d releases sent, want 2 (the give-back and the newer holding's)", n)
	}
}
