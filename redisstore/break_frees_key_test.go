package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// A lock broken by another process (dlock.Break through another store) is
// reported lost, as taken by another owner, at the holder's next renewal;
// the next holding's fence is greater. The negative control is
// TestDeletedKeyIsKeyGone: a plain DEL of the key is reported as "key
// gone" (ErrExpired), which is what Break's tombstone naming the broken
// owner changes.
func TestBreakEndsAutoRenewedLeaseAsTaken(t *testing.T) {
	e := startRedis(t, false)
	c := redisClient(t, e.addr())
	ctx := testkit.Ctx(t)
	l := clienttest.MustLock(t, c, ctx, "broken", dlock.WithAutoRenew(300*time.Millisecond))
	b, err := dlock.Break(ctx, e.direct, "broken")
	if err != nil || !b.Held || b.NotALock || b.Fence != l.Fence() || b.Holds != 1 || b.Token != l.Token() {
		t.Fatalf("Break = %+v, %v; want the holding of fence %d", b, err, l.Fence())
	}
	testkit.Closed(t, l.Done(), 2*time.Second, "loss after the break")
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("Err after Break = %v; want ErrLost, cause ErrTaken", err)
	}
	next := clienttest.MustLock(t, redisClient(t, e.addr()), ctx, "broken")
	if next.Fence() <= l.Fence() {
		t.Fatalf("fence after Break = %d; want greater than the broken holding's %d", next.Fence(), l.Fence())
	}
}

// A value at the lock's key that is not a lock, of any Redis type, blocks
// the key until Break removes it (NotALock); the key can then be locked.
func TestBreakRemovesValueNotALock(t *testing.T) {
	e := startRedis(t, false)
	c := redisClient(t, e.addr())
	ctx := testkit.Ctx(t)
	for key, cmd := range map[string][]string{"str": {"SET", "dlock:{str}", "hello"}, "hash": {"HSET", "dlock:{hash}", "f", "v"}} {
		if _, err := e.srv.Do(cmd...); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: TryLock of a key holding a value that is not a lock: %v; want it refused", key, err)
		}
		b, err := dlock.Break(ctx, e.direct, key)
		if err != nil || !b.Held || !b.NotALock {
			t.Fatalf("%s: Break = %+v, %v; want NotALock", key, b, err)
		}
		l := clienttest.MustLock(t, c, ctx, key)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
