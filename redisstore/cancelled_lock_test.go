package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// A Lock whose context ends while its attempt is in flight (the server
// is paused) must not leave the key held for the TTL once the server
// resumes: another client's bounded wait succeeds well within it.
// (Was the root package's TestL1CancelledLockLeavesNoGhost, review item L1.)
func TestCancelledLockLeavesNoGhost(t *testing.T) {
	e := startRedis(t, false)
	a := redisClient(t, e.addr())
	b := redisClient(t, e.addr())
	const ttl = 5 * time.Second

	e.srv.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := a.Lock(ctx, "L1", dlock.WithTTL(ttl))
	cancel()
	e.srv.Resume()
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a paused server = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}

	start := time.Now()
	l, err := b.Lock(testkit.Ctx(t), "L1", dlock.WithTTL(ttl), dlock.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("another client's Lock(WithWait(2s)) after the cancelled one: %v (the key stayed held: a ghost for the TTL)", err)
	}
	t.Logf("the other client acquired %v after the server resumed", time.Since(start).Round(time.Millisecond))
	clienttest.Release(t, l)
}

// With an explicit owner: no release after a lost reply (it could strip a hold
// the owner took earlier); the owner's earlier hold is intact. (Was the
// root package's TestL1OwnerKeepsItsHoldAfterCancelledReentry.)
func TestOwnerKeepsItsHoldAfterCancelledReentry(t *testing.T) {
	e := startRedis(t, false)
	a := redisClient(t, e.addr())
	octx := dlock.ContextWithOwner(testkit.Ctx(t), dlock.NewOwner())
	outer := clienttest.MustLock(t, a, octx, "L1o", dlock.WithTTL(5*time.Second))

	e.srv.Pause()
	ctx, cancel := context.WithTimeout(octx, 200*time.Millisecond)
	_, err := a.Lock(ctx, "L1o", dlock.WithTTL(5*time.Second))
	cancel()
	e.srv.Resume()
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("re-entry on a paused server = %v, want ErrNotAcquired", err)
	}
	// No background release may take the outer hold: give one the time to
	// (a bounded poll, the key must stay held throughout).
	if testkit.Eventually(300*time.Millisecond, func() bool { return !e.held(t, "L1o") }) {
		t.Fatal("the key was freed under the owner's outer hold")
	}
	if err := outer.Extend(testkit.Ctx(t), 5*time.Second); err != nil {
		t.Fatalf("outer lease after the cancelled re-entry: %v", err)
	}
}
