package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
)

// The user API (dlock.Semaphores) on a real Redis, two "processes" (each a
// store and a Semaphores): a waiter with an hour's backoff, behind a holder
// whose renewed lease has 30 s to run, gets in within seconds of the
// release, so it was woken by the store's PermitNotifier (pub/sub), not by
// pacing; a limit that is not the key's is ErrInvalid with the store's
// LimitMismatchError, at once.
func TestSemaphoreUserAPI(t *testing.T) {
	_, rdb := newRedis(t)
	ctx := testCtx(t)
	newSems := func() *dlock.Semaphores {
		s, err := dlock.NewSemaphores(newStore(t, rdb), dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	a, b := newSems(), newSems()
	held, err := a.Acquire(ctx, "sem", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "sem", 3, 1)
	var lm *driver.LimitMismatchError
	if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &lm) {
		t.Fatalf("TryAcquire with another limit: %v, want ErrInvalid and LimitMismatchError", err)
	}
	got, subscribed := make(chan struct{}), make(chan struct{})
	// The first failed attempt subscribes; the second one's pause sleeps on
	// the subscription.
	onRetry := dlock.WithOnRetry(func(failures int, _ error) {
		if failures == 2 {
			close(subscribed)
		}
	})
	go func() {
		defer close(got)
		p, err := b.Acquire(ctx, "sem", 2, 1, onRetry)
		if err != nil {
			t.Error(err)
			return
		}
		if err := p.Release(ctx); err != nil {
			t.Error(err)
		}
	}()
	testkit.Closed(t, subscribed, 10*time.Second, "the waiter's second failed attempt")
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Closed(t, got, 10*time.Second, "the waiter woken by the release")
}
