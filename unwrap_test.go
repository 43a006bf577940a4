package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// wrapped returns a Client over a counting wrapper of shared, with Unwrap
// (capabilities found through it) or without (hidden).
func wrapped(t *testing.T, shared *memstore.Store, unwrap bool, opts ...dlock.Option) (*dlock.Client, *faultStore) {
	t.Helper()
	fs := &faultStore{Mutex: shared}
	var s driver.Mutex = fs
	if unwrap {
		s = unwrapStore{fs}
	}
	c, err := dlock.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, fs
}

// awaitCalls polls until fs has seen at least n calls, within 5 s.
func awaitCalls(t *testing.T, fs *faultStore, n int64) {
	t.Helper()
	waitFor(t, 5*time.Second, fmt.Sprintf("%d store calls", n), func() bool { return fs.calls.Load() >= n })
}

// Through a wrapper with Unwrap, a waiter of another Client is woken by the
// store's release notification (driver.Notifier): its wait costs three
// Acquire calls (try, retry after subscribing, the one after the wake-up)
// although its backoff is 10 s. Without Unwrap the Client falls back to
// polling, and acquires all the same.
func TestWrapperUnwrapGivesNotifyWakeUp(t *testing.T) {
	slow := dlock.WithBackoff(func(int) time.Duration { return 10 * time.Second })
	fast := dlock.WithBackoff(func(int) time.Duration { return 2 * time.Millisecond })
	for _, tc := range []struct {
		name   string
		unwrap bool
		opt    dlock.Option
	}{{"unwrap", true, slow}, {"hidden", false, fast}} {
		t.Run(tc.name, func(t *testing.T) {
			shared := memstore.New(nil)
			ctx := testCtx(t)
			a, _ := wrapped(t, shared, tc.unwrap)
			b, fs := wrapped(t, shared, tc.unwrap, tc.opt)
			holder := mustLock(t, a, ctx, "k")
			got := make(chan error, 1)
			go func() {
				l, err := b.Lock(ctx, "k", dlock.WithWait(5*time.Second))
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			// Subscribed and retried (unwrap), or polled a few times (hidden).
			awaitCalls(t, fs, map[bool]int64{true: 2, false: 5}[tc.unwrap])
			release(t, holder)
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			acquires := fs.calls.Load() - fs.released.Load()
			if tc.unwrap && acquires != 3 {
				t.Fatalf("%d Acquire calls through the wrapper, want 3: no polling", acquires)
			}
			if !tc.unwrap && acquires < 5 {
				t.Fatalf("%d Acquire calls without Unwrap, want polling (5 or more)", acquires)
			}
		})
	}
}

// Through a wrapper with Unwrap, a local waiter gets the lock by handoff
// (driver.Transferer, one store call the wrapper does not see): two
// holdings cost the wrapper one Acquire and one Release, and the second has
// a greater fence. Without Unwrap: release and acquire, four calls.
func TestWrapperUnwrapGivesLocalHandoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unwrap bool
		calls  int64
	}{{"unwrap", true, 2}, {"hidden", false, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c, fs := wrapped(t, memstore.New(nil), tc.unwrap)
			holder := mustLock(t, c, ctx, "k")
			got := make(chan *dlock.Lease, 1)
			errs := make(chan error, 1)
			go func() {
				l, err := c.Lock(ctx, "k")
				if err != nil {
					errs <- err
					return
				}
				got <- l
			}()
			waitFor(t, 5*time.Second, "the waiter queued", func() bool { return dlock.QueuedWaiters(c, "k") == 1 })
			release(t, holder)
			var next *dlock.Lease
			select {
			case next = <-got:
			case err := <-errs:
				t.Fatal(err)
			}
			if next.Fence() <= holder.Fence() {
				t.Fatalf("fence %d after %d: not increasing", next.Fence(), holder.Fence())
			}
			release(t, next)
			if n := fs.calls.Load(); n != tc.calls {
				t.Fatalf("%d store calls through the wrapper, want %d", n, tc.calls)
			}
			if _, err := c.TryLock(ctx, "k"); errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("key still held after both releases: %v", err)
			}
		})
	}
}
