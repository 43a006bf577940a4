package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/memstore"
)

// errNoPerm stands for what redisstore reports for NOPERM, WRONGPASS,
// WRONGTYPE, an unknown command or a non-lock value at the key.
var errNoPerm = fmt.Errorf("%w: NOPERM this user has no permissions to run the 'evalsha' command", dlock.ErrRefused)

// refusingStore wraps memstore and refuses (or fails) the calls it is told
// to, counting the calls that reached it.
type refusingStore struct {
	*memstore.Store
	acquireErr  atomic.Pointer[error] // Acquire's error, if set
	transferErr atomic.Pointer[error] // Transfer's error, if set
	acquires    atomic.Int64
}

func (s *refusingStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.acquires.Add(1)
	if e := s.acquireErr.Load(); e != nil {
		return driver.Grant{}, *e
	}
	return s.Store.Acquire(ctx, key, token, ttl)
}

func (s *refusingStore) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if e := s.transferErr.Load(); e != nil {
		return driver.Grant{}, *e
	}
	return s.Store.Transfer(ctx, key, from, to, ttl)
}

func newRefusing(t *testing.T, opts ...dlock.Option) (*dlock.Client, *refusingStore) {
	t.Helper()
	s := &refusingStore{Store: memstore.New(nil)}
	c, err := dlock.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// An error retrying cannot fix ends Lock (no wait bound, background
// context), TryLock and Do at once, matching ErrRefused and ErrNotAcquired;
// WithOnRetry is not called for it. (Was TestL6RefusedEndsTheWaitAtOnce,
// review item L6.)
func TestRefusedEndsTheWaitAtOnce(t *testing.T) {
	c, s := newRefusing(t)
	s.acquireErr.Store(&errNoPerm)
	retried := false
	onRetry := dlock.WithOnRetry(func(int, error) { retried = true })
	done := make(chan error, 3)
	go func() {
		_, err := c.Lock(context.Background(), "k", onRetry)
		done <- err
		_, err = c.TryLock(context.Background(), "k")
		done <- err
		done <- c.Do(context.Background(), "k", func(context.Context) error { return nil })
	}()
	for _, call := range []string{"Lock", "TryLock", "Do"} {
		select {
		case err := <-done:
			if !errors.Is(err, dlock.ErrRefused) || !errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("%s = %v, want ErrRefused and ErrNotAcquired naming NOPERM", call, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waiting 5s after a refusal", call)
		}
	}
	if n := s.acquires.Load(); n != 3 || retried {
		t.Fatalf("store asked %d times (want 3, one per call), OnRetry called: %v", n, retried)
	}
}

// A refusal through the local queue: waiters queued behind a sibling all end with
// the refusal (each asks once), none hangs. (Was
// TestL6RefusedReachesQueuedWaiters.)
func TestRefusedReachesQueuedWaiters(t *testing.T) {
	c, s := newRefusing(t)
	ctx := testCtx(t)
	l := mustLock(t, c, ctx, "k")
	const n = 5
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := c.Lock(ctx, "k", dlock.WithTTL(time.Second))
			errs <- err
		})
	}
	testkit.WaitFor(t, 5*time.Second, "waiters queued", func() bool { return dlock.QueuedWaiters(c, "k") == n })
	s.acquireErr.Store(&errNoPerm)
	s.transferErr.Store(&errNoPerm) // the handoff is refused too: a plain release follows
	release(t, l)
	wg.Wait()
	for range n {
		if err := <-errs; !errors.Is(err, dlock.ErrRefused) {
			t.Fatalf("queued waiter: %v, want ErrRefused", err)
		}
	}
	s.acquireErr.Store(nil)
	if _, err := c.Store().Acquire(ctx, "k", "probe", time.Second); err != nil {
		t.Fatalf("key after a refused handoff: %v (the holder's release did not reach the store)", err)
	}
}

// Transient unavailability keeps the wait going, and WithOnRetry is
// told of it with an error matching ErrUnavailable, until the store answers.
// (Was TestL6UnavailableRetriesAndTellsOnRetry.)
func TestUnavailableRetriesAndTellsOnRetry(t *testing.T) {
	c, s := newRefusing(t, dlock.WithBackoff(func(int) time.Duration { return time.Millisecond }))
	down := error(errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
	s.acquireErr.Store(&down)
	var told atomic.Int64
	var unavailable atomic.Bool
	onRetry := dlock.WithOnRetry(func(failures int, err error) {
		if told.Add(1) == 3 {
			unavailable.Store(errors.Is(err, dlock.ErrUnavailable))
			s.acquireErr.Store(nil) // the store comes back
		}
	})
	l, err := c.Lock(testCtx(t), "k", onRetry, dlock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Lock after the store came back: %v", err)
	}
	release(t, l)
	if told.Load() != 3 || !unavailable.Load() {
		t.Fatalf("OnRetry called %d times (want 3), with ErrUnavailable: %v", told.Load(), unavailable.Load())
	}
}
