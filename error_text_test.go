package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/memstore"
)

// oneLine fails the test unless err's text is one line with at most one
// "dlock:" prefix.
func oneLine(t *testing.T, what string, err error) {
	t.Helper()
	s := err.Error()
	if strings.Contains(s, "\n") || strings.Count(s, "dlock:") > 1 {
		t.Fatalf("%s: %q, want one line with at most one \"dlock:\" prefix", what, s)
	}
}

// hangingStore refuses the first connection, then hangs every call until
// its context ends, as a store behind a dead network does.
type hangingStore struct {
	*memstore.Store
	calls atomic.Int64
}

var errRefusedConn = errors.New("dial tcp 127.0.0.1:6390: connect: connection refused")

func (s *hangingStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if s.calls.Add(1) == 1 {
		return driver.Grant{}, errRefusedConn
	}
	<-ctx.Done()
	return driver.Grant{}, ctx.Err()
}

func newHanging(t *testing.T) (*dlock.Client, *hangingStore) {
	t.Helper()
	s := &hangingStore{Store: memstore.New(nil)}
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// The remaining time in a ContendedError is the holder's lease, in ms.
// (Was TestA6ContendedSaysWhoseTimeItIs, review item A6.)
func TestContendedErrorSaysWhoseTimeItIs(t *testing.T) {
	s := (&dlock.ContendedError{Remaining: 29395717523 * time.Nanosecond}).Error()
	if !strings.Contains(s, "its lease ends in 29.396s") {
		t.Fatalf("%q: want the holder's remaining lease, rounded to ms", s)
	}
}

// WithWait against a store that stops answering reports the last
// answer's cause (matchable), not the wait's own deadline.
// (Was TestA6WaitBoundKeepsTheLastCause.)
func TestWaitBoundKeepsTheLastCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newHanging(t)
		_, err := c.Lock(testCtx(t), "k", dlock.WithWait(100*time.Millisecond),
			dlock.WithBackoff(func(int) time.Duration { return time.Millisecond }))
		if !errors.Is(err, errRefusedConn) || !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, dlock.ErrNotAcquired) ||
			errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("got %v; want the refused connection as the cause, not a deadline", err)
		}
		oneLine(t, "wait bound", err)
	})
}

// The caller's deadline gives one line matching both errors, and the
// last cause.
// (Was TestA6ContextDeadlineIsOneLine.)
func TestContextDeadlineErrorIsOneLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newHanging(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Lock(ctx, "k", dlock.WithBackoff(func(int) time.Duration { return time.Millisecond }))
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, errRefusedConn) {
			t.Fatalf("got %v", err)
		}
		oneLine(t, "context deadline", err)

		// Contended, not unavailable: also one line.
		mc, _ := newClient(t)
		held := mustLock(t, mc, testCtx(t), "k")
		defer release(t, held)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel2()
		_, err = mc.Lock(ctx2, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "held by another owner") {
			t.Fatalf("got %v", err)
		}
		oneLine(t, "contended deadline", err)
	})
}

// An already-ended context fails before any I/O with its own error,
// not as an unreachable store; so does one cancelled while the only attempt
// is in flight.
// (Was TestA6CancelledContextIsNotUnavailable.)
func TestCancelledContextIsNotUnavailable(t *testing.T) {
	c, fs := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, op := range []func() error{
		func() error { _, err := c.Lock(ctx, "k"); return err },
		func() error { _, err := c.TryLock(ctx, "k"); return err },
		func() error { return c.Do(ctx, "k", func(context.Context) error { return nil }) },
	} {
		err := op()
		if !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrNotAcquired) ||
			errors.Is(err, dlock.ErrUnavailable) || strings.Contains(err.Error(), "unavailable") {
			t.Fatalf("cancelled context: %v; want context.Canceled, not ErrUnavailable", err)
		}
		oneLine(t, "cancelled", err)
	}
	if n := fs.calls.Load(); n != 0 {
		t.Fatalf("an ended context reached the store %d times", n)
	}

	hc, hs := newHanging(t)
	hs.calls.Store(1) // no refused connection first: the call just hangs
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		defer cancel2()
		testkit.Eventually(5*time.Second, func() bool { return hs.calls.Load() >= 2 })
	}()
	_, err := hc.Lock(ctx2, "k")
	if !errors.Is(err, context.Canceled) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("cancelled mid-call: %v; want context.Canceled, not ErrUnavailable", err)
	}
}

// A lock whose key was deleted is lost as "key gone", not "lease
// expired", still matching ErrExpired; one "dlock:" prefix. The key is
// deleted behind the Client's back, as a DEL on the server does.
// (Was TestA6DeletedKeyIsKeyGone, on a real Redis.)
func TestDeletedKeyIsKeyGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fs := newClient(t)
		l := mustLock(t, c, testCtx(t), "A6", dlock.WithAutoRenew(300*time.Millisecond))
		fs.mu.Lock()
		token := fs.lastToken
		fs.mu.Unlock()
		if err := fs.Mutex.Release(testCtx(t), "A6", token); err != nil {
			t.Fatal(err)
		}
		within(t, l.Done(), 2*time.Second, "loss after the key was deleted")
		err := l.Err()
		if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) ||
			!strings.Contains(err.Error(), "key gone") || strings.Contains(err.Error(), "lease expired") {
			t.Fatalf("Err after DEL = %v; want ErrLost and ErrExpired, saying the key is gone", err)
		}
		oneLine(t, "key gone", err)
	})
}

// Do's result when both fn and the release fail is one line, matching
// both errors.
// (Was TestA6DoJoinedErrorIsOneLine.)
func TestDoJoinedErrorIsOneLine(t *testing.T) {
	c, _ := newClient(t)
	errFn := errors.New("fn failed")
	err := c.Do(testCtx(t), "k", func(ctx context.Context) error {
		l, _ := dlock.LeaseFromContext(ctx)
		_ = l.Release(ctx) // so that Do's own release fails
		return errFn
	})
	if !errors.Is(err, errFn) || !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Do = %v, want fn's error and ErrNotHeld", err)
	}
	oneLine(t, "Do joined", err)
}
