package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// gatedStore holds the first Acquire call at a gate until released.
type gatedStore struct {
	driver.Mutex
	once    sync.Once
	arrived chan struct{}
	gate    chan struct{}
}

// Unwrap lets the Client find the wrapped store's capabilities (notify,
// handoff, batched renewal) through the wrapper (driver.As).
func (s *gatedStore) Unwrap() driver.Mutex { return s.Mutex }

func (g *gatedStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.arrived)
		<-g.gate
	}
	return g.Mutex.Acquire(ctx, key, token, ttl)
}

// A TryLock must not report contention on a key that is free in the store
// just because another goroutine of the same client is still acquiring it
// (found by the linearizability check of the chaos suite).
func TestTryLockDuringASiblingsAcquisitionAsksTheStore(t *testing.T) {
	gs := &gatedStore{Mutex: memstore.New(nil), arrived: make(chan struct{}), gate: make(chan struct{})}
	c, err := dlock.New(gs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	sibling := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", dlock.WithTTL(time.Second))
		if err == nil {
			err = l.Release(ctx)
		}
		sibling <- err
	}()
	<-gs.arrived // the sibling's attempt is in flight; the key is free in the store
	l, err := c.TryLock(ctx, "k", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("TryLock on a free key while a sibling acquires: %v", err)
	}
	close(gs.gate) // the sibling now finds the key held and waits for it
	release(t, l)
	if err := <-sibling; err != nil {
		t.Fatalf("sibling: %v", err)
	}
	// With a local holder whose lease is valid, TryLock still fails at once.
	h := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Second))
	defer release(t, h)
	if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with a local holder: %v", err)
	}
}
