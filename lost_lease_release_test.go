package dlock_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A lost lease hands nothing on: its Release sends one
// token-checked release however often it is called, and a local waiter
// acquires from the store rather than by handoff. (Was
// TestL3ReleaseOfLostLeaseSendsOneRelease, review item L3.)
func TestReleaseOfLostLeaseSendsOneRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// Concurrent Releases of one lost lease: still one release sent.
// (Was TestL3ConcurrentReleasesOfLostLease.)
func TestConcurrentReleasesOfLostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// For an explicit Owner: the lost lease's hold is given back (the owner
// had no other live holding of the key), and never from under a newer
// holding of the same owner, which shares the owner's token: the new
// acquisition waits for a give-back under way, or the give-back waits for
// the newer holding's end. Negative control: once both ended the key is
// free, so the "held" check can fail.
// (Was TestL3LostOwnerLeaseNeverStripsTheNewerHolding.)
func TestLostOwnerLeaseNeverStripsTheNewerHolding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}
