package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

// queueGhost puts token in key's queue of f by hand, with a waiter lease of
// d on the server's clock: a waiter that queues and is not served yet.
func queueGhost(t *testing.T, rdb *redis.Client, f *redisstore.FairStore, key, token string, d time.Duration) {
	t.Helper()
	now, err := rdb.Time(testCtx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	queue, waiters := f.QueueKeys(key)
	deadline := float64(now.Add(d).UnixMilli())
	if err := rdb.RPush(testCtx(t), queue, token).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(testCtx(t), waiters, redis.Z{Score: deadline, Member: token}).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestFairTryDoesNotJumpTheQueue: a plain Acquire (TryLock) of a free key
// fails while another token queues for it, and writes nothing; once that
// waiter's lease ends (evicted), it succeeds. The holder's re-entry is
// granted whatever queues. Negative control: the default Store's Acquire
// on the same state takes the key past the queue.
func TestFairTryDoesNotJumpTheQueue(t *testing.T) {
	srv, rdb := newRedis(t)
	f := newFairStore(t, rdb, &redisstore.Options{WaiterLease: redisstore.MinWaiterLease})
	ctx := testCtx(t)
	queueGhost(t, rdb, f, "k", "ghost", 300*time.Millisecond)
	_, err := f.Acquire(ctx, "k", "jumper", time.Minute)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || ce.Remaining >= 0 {
		t.Fatalf("Acquire past a queued waiter = %v; want ContendedError with unknown Remaining", err)
	}
	if n, _ := srv.Do("EXISTS", "dlock:{k}"); n != "0" {
		t.Fatalf("a refused Acquire wrote the lock (EXISTS = %s)", n)
	}
	if w, err := f.Waiters(ctx, "k"); w != 1 || err != nil {
		t.Fatalf("Waiters = %d, %v; want the queued one", w, err)
	}
	testkit.WaitFor(t, 5*time.Second, "the ghost's lease to end and the key to be granted", func() bool {
		_, err := f.Acquire(ctx, "k", "jumper", time.Minute)
		return err == nil
	})
	queueGhost(t, rdb, f, "k", "ghost2", time.Minute)
	if g, err := f.Acquire(ctx, "k", "jumper", time.Minute); err != nil || g.Holds != 2 {
		t.Fatalf("re-entry with a waiter queued = %+v, %v; want 2 holds", g, err)
	}

	// The control: the default store ignores the queue.
	queueGhost(t, rdb, f, "k2", "ghost", time.Minute)
	if _, err := newStore(t, rdb).Acquire(ctx, "k2", "jumper", time.Minute); err != nil {
		t.Fatalf("control: the default store's Acquire = %v; want it to take the key past the queue", err)
	}
}

// TestFairLeavingHeadPassesTheTurnOn: the head of the queue gives up (its
// clean-up runs) while the key is free for it; the next waiter gets the key
// at once (the leave announces it), not after the head's waiter lease.
func TestFairLeavingHeadPassesTheTurnOn(t *testing.T) {
	_, rdb := newRedis(t)
	lease := 5 * time.Second
	f := newFairStore(t, rdb, &redisstore.Options{WaiterLease: lease})
	ctx := testCtx(t)
	if _, err := f.Acquire(ctx, "k", "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	queueGhost(t, rdb, f, "k", "head", lease)
	done := make(chan error, 1)
	other := newFairStore(t, otherClient(t, rdb), &redisstore.Options{WaiterLease: lease})
	go func() {
		_, err := other.AcquireQueued(ctx, "k", "next", time.Minute)
		done <- err
	}()
	testkit.WaitFor(t, 5*time.Second, "second waiter queued", func() bool { w, _ := f.Waiters(ctx, "k"); return w == 2 })
	if err := f.Release(ctx, "k", "holder"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	redisstore.FairLeave(ctx, f, "k", "head", "no-such-call")
	select {
	case err := <-done:
		if el := time.Since(start); err != nil || el > lease/6 {
			t.Fatalf("the next waiter: %v after %v; want the key well before its next renewal (%v)", err, el, lease/3)
		}
	case <-time.After(lease + 5*time.Second):
		t.Fatal("the next waiter never got the key")
	}
}

// TestFairResentTryAndLostGrant: a resent try (same call id) that was
// granted answers the same grant and adds no hold; a waiter that gives up
// after a try whose grant reply was lost gives that hold back, and only
// that one (a clean-up naming another call leaves the holding alone).
func TestFairResentTryAndLostGrant(t *testing.T) {
	_, rdb := newRedis(t)
	f := newFairStore(t, rdb, nil)
	ctx := testCtx(t)
	g1, err1 := redisstore.FairTry(ctx, f, "k", "tok", time.Minute, "c1", true)
	g2, err2 := redisstore.FairTry(ctx, f, "k", "tok", time.Minute, "c1", true)
	if err1 != nil || err2 != nil || g1 != g2 || g2.Holds != 1 {
		t.Fatalf("a try and its resend = %+v, %v and %+v, %v; want one grant, one hold", g1, err1, g2, err2)
	}
	redisstore.FairLeave(ctx, f, "k", "tok", "c0") // control: another call
	if info, err := f.Inspect(ctx, "k"); err != nil || !info.Held {
		t.Fatalf("a clean-up of another call freed the key: %+v, %v", info, err)
	}
	redisstore.FairLeave(ctx, f, "k", "tok", "c1")
	if info, err := f.Inspect(ctx, "k"); err != nil || info.Held || info.Fence != g1.Fence {
		t.Fatalf("after the clean-up of the granted call: %+v, %v; want free, keeping fence %d", info, err, g1.Fence)
	}
}

// otherClient is a new client of rdb's server (another process).
func otherClient(t *testing.T, rdb *redis.Client) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
