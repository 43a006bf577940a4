package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
)

func TestBadInputIsRejectedBeforeIO(t *testing.T) {
	c, fs := newClient(t)
	ctx := testCtx(t)
	cases := map[string]struct {
		key  string
		opts []dlock.Option
	}{
		"empty key":       {"", nil},
		"long key":        {strings.Repeat("k", dlock.MaxKeyLen+1), nil},
		"invalid utf-8":   {"k\xff", nil},
		"zero ttl":        {"k", []dlock.Option{dlock.WithTTL(0)}},
		"negative ttl":    {"k", []dlock.Option{dlock.WithTTL(-time.Second)}},
		"sub-minimum ttl": {"k", []dlock.Option{dlock.WithTTL(500 * time.Microsecond)}},
		"absurd ttl":      {"k", []dlock.Option{dlock.WithTTL(1_000_000 * time.Hour)}},
		"zero auto-renew": {"k", []dlock.Option{dlock.WithAutoRenew(0)}},
		"negative wait":   {"k", []dlock.Option{dlock.WithWait(-time.Second)}},
		"nil backoff":     {"k", []dlock.Option{dlock.WithBackoff(nil)}},
		"nil clock":       {"k", []dlock.Option{dlock.WithClock(nil)}},
		"absurd resource": {"k", []dlock.Option{dlock.WithRead(strings.Repeat("r", 5000))}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, op := range []func() (*dlock.Lease, error){
				func() (*dlock.Lease, error) { return c.Lock(ctx, tc.key, tc.opts...) },
				func() (*dlock.Lease, error) { return c.TryLock(ctx, tc.key, tc.opts...) },
			} {
				l, err := op()
				if l != nil || !errors.Is(err, dlock.ErrInvalid) {
					t.Fatalf("got %v, %v; want nil lease and ErrInvalid", l, err)
				}
			}
			err := c.Do(ctx, tc.key, func(context.Context) error { return nil }, tc.opts...)
			if !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("Do: got %v, want ErrInvalid", err)
			}
		})
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.Lock(nil, "k"); !errors.Is(err, dlock.ErrInvalid) { //nolint:staticcheck
		t.Fatalf("nil ctx: %v", err)
	}
	if err := c.Do(ctx, "k", nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("nil fn: %v", err)
	}
	if _, err := dlock.New(nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("nil store: %v", err)
	}
	if _, err := dlock.New(fs, dlock.WithTTL(0)); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("New with zero ttl: %v", err)
	}
	if n := fs.calls.Load(); n != 0 {
		t.Fatalf("bad input reached the store %d times", n)
	}
}

// A zero or tiny TTL must never produce a "held" lock (one peer library
// returns a lease with no key behind it).
func TestTinyTTLNeverHandsOutALock(t *testing.T) {
	c, _ := newClient(t)
	for _, ttl := range []time.Duration{0, time.Nanosecond, 500 * time.Microsecond, -time.Second} {
		l, err := c.TryLock(testCtx(t), "tiny", dlock.WithTTL(ttl))
		if l != nil || err == nil {
			t.Fatalf("ttl %v: got lease %v, err %v", ttl, l, err)
		}
	}
}

func TestTryLockContended(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	l := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Second))
	defer release(t, l)
	_, err := c.TryLock(ctx, "k")
	var ce *dlock.ContendedError
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.As(err, &ce) || ce.Remaining <= 0 {
		t.Fatalf("TryLock on held key: %v", err)
	}
}

func TestCancelledWaitMatchesBothErrors(t *testing.T) {
	c, _ := newClient(t)
	l := mustLock(t, c, testCtx(t), "k")
	defer release(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Lock(ctx, "k")
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
}

func TestWaitBoundIsIndependentOfTTLAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t)
		l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(time.Minute))
		defer release(t, l)
		start := time.Now()
		_, err := c.Lock(testCtx(t), "k", dlock.WithWait(80*time.Millisecond))
		el := time.Since(start)
		if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrNotAcquired without a context error", err)
		}
		if el != 80*time.Millisecond { // the bubble's clock: exact
			t.Fatalf("waited %v, want 80ms", el)
		}
	})
}

func TestReleaseWakesWaiterPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t)
		ctx := testCtx(t)
		l := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute))
		got := make(chan time.Duration, 1)
		var released time.Time
		waiting := make(chan struct{})
		go func() {
			close(waiting)
			l2, err := c.Lock(ctx, "k")
			if err != nil {
				got <- -1
				return
			}
			got <- time.Since(released)
			_ = l2.Release(ctx)
		}()
		<-waiting
		synctest.Wait() // the waiter has subscribed and parked
		released = time.Now()
		release(t, l)
		d := <-got
		if d != 0 { // the bubble's clock: no time passes unless a goroutine waits on a timer
			t.Fatalf("waiter acquired %v after release, want at once (a minute-long TTL means it was woken, not polling)", d)
		}
	})
}
