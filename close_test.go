package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// Close frees every key the client holds in the store (auto-renewed,
// fixed, re-entered), ends those leases and Do's context, wakes a waiter,
// makes later calls fail with ErrInvalid before any I/O, is idempotent and
// leaves the store usable.
//
// Was TestA3CloseReleasesEverythingAndRefusesLaterCalls (review item A3),
// on a real Redis.
func TestCloseReleasesEverythingAndRefusesLaterCalls(t *testing.T) {
	c, fs := newClient(t)
	other := newClientOn(t, fs)
	held := func(key string) bool {
		info, err := fs.Mutex.(*memstore.Store).Inspect(testCtx(t), key)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", key, err)
		}
		return info.Held
	}
	ctx := testCtx(t)

	renewed := mustLock(t, c, ctx, "a3-renewed", dlock.WithAutoRenew(300*time.Millisecond))
	octx := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	fixed := mustLock(t, c, octx, "a3-fixed", dlock.WithTTL(10*time.Second))
	inner := mustLock(t, c, octx, "a3-fixed", dlock.WithTTL(10*time.Second))
	doCancelled := make(chan error, 1)
	inDo := make(chan struct{})
	go func() {
		doCancelled <- c.Do(ctx, "a3-do", func(ctx context.Context) error {
			close(inDo)
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	within(t, inDo, 5*time.Second, "Do running")
	heldByOther := mustLock(t, other, ctx, "a3-waited", dlock.WithTTL(10*time.Second))
	waited := make(chan error, 1)
	waiting := make(chan struct{}, 1)
	go func() {
		_, err := c.Lock(ctx, "a3-waited", dlock.WithOnRetry(func(int, error) {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}))
		waited <- err
	}()
	within(t, waiting, 5*time.Second, "the wait in progress") // contended once

	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, k := range []string{"a3-renewed", "a3-fixed", "a3-do"} {
		if held(k) {
			t.Fatalf("%s still held in the store after Close", k)
		}
	}
	for _, l := range []*dlock.Lease{renewed, fixed, inner} {
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("lease after Close: Err = %v, want ErrLost and ErrInvalid", err)
		}
	}
	select {
	case err := <-doCancelled:
		if !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Do after Close = %v, want ErrLost (its context cancelled)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Do's function was not told of Close")
	}
	select {
	case err := <-waited:
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("wait in progress at Close = %v, want ErrNotAcquired and ErrInvalid", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wait in progress outlived Close (the holder's lease is 10 s)")
	}
	release(t, heldByOther)

	if _, err := c.Lock(ctx, "x"); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Lock after Close = %v, want ErrInvalid", err)
	}
	if _, err := c.TryLock(ctx, "x"); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("TryLock after Close = %v, want ErrInvalid", err)
	}
	if err := c.Do(ctx, "x", func(context.Context) error { return nil }); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Do after Close = %v, want ErrInvalid", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if held("x") {
		t.Fatal("a call after Close reached the store")
	}
	// The store is the caller's: still open.
	if _, err := c.Store().Acquire(ctx, "x", "probe", time.Second); err != nil {
		t.Fatalf("store after Close: %v", err)
	}
}

// A nil context is bad input: an ErrInvalid error, nothing closed.
// (Was TestA3CloseNilContext, review item A3.)
func TestCloseNilContext(t *testing.T) {
	c, _ := newClient(t)
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := c.Close(nil); !errors.Is(err, dlock.ErrInvalid) { //nolint:staticcheck
		t.Fatalf("Close(nil) = %v", err)
	}
	l := mustLock(t, c, testCtx(t), "k")
	release(t, l)
}
