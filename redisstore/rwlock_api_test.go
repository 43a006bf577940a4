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

// The user API (dlock.RWLocks) on a real Redis, two "processes" (each a
// store and an RWLocks): a reader with an hour's backoff, behind a writer
// whose renewed lease has 30 s to run, gets in within seconds of the
// release, so it was woken by the store's RWNotifier (pub/sub), not by
// pacing; readers of both overlap; a downgrade keeps the fence and lets a
// reader of the other process join; an upgrade through RDo's context is
// refused at once; a writer waiting behind the readers gets in once they
// leave, with a greater fence.
func TestRWLockUserAPI(t *testing.T) {
	_, rdb := newRedis(t)
	ctx := testCtx(t)
	newLocks := func() *dlock.RWLocks {
		l, err := dlock.NewRWLocks(newStore(t, rdb), dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		return l
	}
	a, b := newLocks(), newLocks()
	w, err := a.Lock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	subscribed := make(chan struct{})
	// The first refused attempt subscribes; the second one's pause sleeps
	// on the subscription.
	onRetry := dlock.WithOnRetry(func(failures int, _ error) {
		if failures == 2 {
			close(subscribed)
		}
	})
	r1 := rwWaitIn(t, "the reader woken by the release", func() (*dlock.RWHolding, error) { return b.RLock(ctx, "rw", onRetry) }, func() {
		testkit.Closed(t, subscribed, 10*time.Second, "the reader's second refused attempt")
		if err := w.Release(ctx); err != nil {
			t.Error(err)
		}
	})
	r2, err := a.TryRLock(ctx, "rw")
	if err != nil {
		t.Fatalf("a second reader: %v, want the key shared", err)
	}
	if r1.Fence() <= w.Fence() || r2.Fence() <= w.Fence() {
		t.Errorf("readers' fences %d, %d, want above the writer's %d", r1.Fence(), r2.Fence(), w.Fence())
	}
	if err := a.RDo(ctx, "rw", func(ctx context.Context) error {
		_, err := a.Lock(ctx, "rw")
		return err
	}); !errors.Is(err, dlock.ErrUpgrade) {
		t.Errorf("Lock under RDo: %v, want ErrUpgrade", err)
	}
	w2 := rwWaitIn(t, "the writer once the readers left", func() (*dlock.RWHolding, error) { return b.Lock(ctx, "rw") }, func() {
		for _, r := range []*dlock.RWHolding{r1, r2} {
			if err := r.Release(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	if w2.Fence() <= r2.Fence() {
		t.Errorf("writer's fence %d, want above the readers' %d", w2.Fence(), r2.Fence())
	}
	if err := w2.Downgrade(ctx); err != nil || w2.Mode() != driver.RWRead {
		t.Fatalf("Downgrade: %v, mode %v; want read", err, w2.Mode())
	}
	r3, err := a.TryRLock(ctx, "rw")
	if err != nil {
		t.Fatalf("a reader after the downgrade: %v, want it in", err)
	}
	_ = r3.Release(ctx)
	_ = w2.Release(ctx)
}

// rwWaitIn runs lock in a goroutine, then then, and returns lock's holding
// once it has one (within 10 s), failing the test otherwise.
func rwWaitIn(t *testing.T, what string, lock func() (*dlock.RWHolding, error), then func()) *dlock.RWHolding {
	t.Helper()
	var h *dlock.RWHolding
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if h, err = lock(); err != nil {
			t.Error(err)
		}
	}()
	then()
	testkit.Closed(t, done, 10*time.Second, what)
	if h == nil {
		t.FailNow()
	}
	return h
}
