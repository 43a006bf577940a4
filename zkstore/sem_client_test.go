package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
)

// TestSemaphoresOnZooKeeper: the user API (dlock.Semaphores) on two
// stores, limit 2: one takes both permits, the other's TryAcquire is
// refused, and its Acquire gets a permit once they are released; the
// permit is renewed (ExtendPermits) while held.
func TestSemaphoresOnZooKeeper(t *testing.T) {
	root := uniq(t)
	a, err := dlock.NewSemaphores(dial(t, root, sessionTimeout, server(t).Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dlock.NewSemaphores(dial(t, root, sessionTimeout, server(t).Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	p, err := a.Acquire(ctx, "s", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "s", 2, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with both permits out: %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() {
		q, err := b.Acquire(ctx, "s", 2, 1)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	if err := p.Extend(ctx, sessionTimeout); err != nil {
		t.Fatalf("Extend of a held permit: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire once the permits came back: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Acquire did not get a permit within 15 s of the release")
	}
}
