package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A panic in Do's function, recovered by the caller (as net/http does
// for handlers), must release the lock, stop its renewal and free the local
// queue slot, and go on as a panic.
//
// Was TestL5DoReleasesWhenFnPanics (review item L5), on a real Redis.
func TestDoReleasesWhenFnPanics(t *testing.T) {
	c, fs := newClient(t)
	other := newClientOn(t, fs)
	ctx := testCtx(t)

	var lease *dlock.Lease
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_ = c.Do(ctx, "L5", func(ctx context.Context) error {
			lease, _ = dlock.LeaseFromContext(ctx)
			panic("boom")
		}, dlock.WithAutoRenew(300*time.Millisecond))
		return nil
	}()
	if recovered != "boom" {
		t.Fatalf("recovered %v, want the function's panic", recovered)
	}
	if lease == nil || !errors.Is(lease.Err(), dlock.ErrNotHeld) {
		t.Fatalf("lease after the panic: %v, want released (ErrNotHeld)", lease)
	}
	if info, err := fs.Mutex.(*memstore.Store).Inspect(ctx, "L5"); err != nil || info.Held {
		t.Fatal("the key is still held in the store after the panic")
	}
	// The local slot is free: the same client gets the key at once, and so
	// does another one (the store's side).
	l, err := c.TryLock(ctx, "L5")
	if err != nil {
		t.Fatalf("same client's TryLock after the panic: %v", err)
	}
	release(t, l)
	l, err = other.TryLock(ctx, "L5")
	if err != nil {
		t.Fatalf("another client's TryLock after the panic: %v", err)
	}
	release(t, l)
}

// Negative control of TestDoReleasesWhenFnPanics: an fn that returns
// normally is unaffected, and its error comes back. (Was TestL5DoReturnsFnError.)
func TestDoReturnsFnError(t *testing.T) {
	c, _ := newClient(t)
	errFn := errors.New("fn failed")
	if err := c.Do(testCtx(t), "k", func(context.Context) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
}
