package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
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

// L6: an error retrying cannot fix ends Lock (no wait bound, background
// context), TryLock and Do at once, matching ErrRefused and ErrNotAcquired;
// WithOnRetry is not called for it.
func TestL6RefusedEndsTheWaitAtOnce(t *testing.T) {
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

// L6 through the local queue: waiters queued behind a sibling all end with
// the refusal (each asks once), none hangs.
func TestL6RefusedReachesQueuedWaiters(t *testing.T) {
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
	if ok, _ := pollUntil(5*time.Second, func() bool { return dlock.QueuedWaiters(c, "k") == n }); !ok {
		t.Fatal("waiters never queued")
	}
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

// L6: transient unavailability keeps the wait going, and WithOnRetry is
// told of it with an error matching ErrUnavailable, until the store answers.
func TestL6UnavailableRetriesAndTellsOnRetry(t *testing.T) {
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

// L6 and A6: a wrong address (a real closed port) is transient: Lock keeps
// trying for the wait bound, then says why, with the cause matchable.
func TestL6WrongAddressNamesTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	c, err := dlock.New(redisStore(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	var tries atomic.Int64
	var firstErr atomic.Pointer[error]
	onRetry := dlock.WithOnRetry(func(_ int, err error) {
		if tries.Add(1) == 1 {
			firstErr.Store(&err)
		}
	})
	start := time.Now()
	_, err = c.Lock(context.Background(), "k", dlock.WithWait(500*time.Millisecond), onRetry)
	el := time.Since(start)
	t.Logf("after %v, %d retries: %v", el.Round(time.Millisecond), tries.Load(), err)
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a wrong address = %v, want ErrNotAcquired and ErrUnavailable, not DeadlineExceeded", err)
	}
	var opErr *net.OpError
	if !strings.Contains(err.Error(), "connection refused") || !errors.As(err, &opErr) {
		t.Fatalf("error %q does not carry the connection's cause", err)
	}
	// go-redis itself retries a failed dial (5 times, 100 ms apart), so
	// one attempt takes about 400 ms: one retry or more within the bound.
	if tries.Load() < 1 || el < 500*time.Millisecond || el > 3*time.Second {
		t.Fatalf("%d retries in %v, want at least one, ending about the 500ms bound", tries.Load(), el)
	}
	if e := firstErr.Load(); e == nil || !errors.Is(*e, dlock.ErrUnavailable) {
		t.Fatal("OnRetry was not told of the unavailability")
	}
}
