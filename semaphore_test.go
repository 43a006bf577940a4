package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// semFault wraps a Semaphore store, counts calls, can fail ExtendPermits
// and, as a negative control, ignore the limit (it asks the store for a
// huge one). It has no Unwrap: it hides the store's PermitNotifier, so
// waiters pace. semNotify lets the notifier through.
type semFault struct {
	driver.Semaphore
	calls       atomic.Int64
	failExt     atomic.Bool
	down        atomic.Bool // every call fails, unsent
	afterGrant  func()      // if set, called after AcquirePermits was applied
	ignoreLimit bool
}

func (f *semFault) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return driver.PermitGrant{}, errDown
	}
	if f.ignoreLimit {
		n = 1 << 20
	}
	g, err := f.Semaphore.AcquirePermits(ctx, key, token, n, k, ttl)
	if f.afterGrant != nil {
		f.afterGrant()
	}
	return g, err
}

func (f *semFault) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	f.calls.Add(1)
	if f.failExt.Load() || f.down.Load() {
		return driver.PermitGrant{}, errDown
	}
	return f.Semaphore.ExtendPermits(ctx, key, token, ttl)
}

func (f *semFault) ReleasePermits(ctx context.Context, key, token string) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Semaphore.ReleasePermits(ctx, key, token)
}

type semNotify struct{ *semFault }

func (s semNotify) Unwrap() driver.Store { return s.semFault.Semaphore }

func newSems(t *testing.T, store driver.Semaphore, opts ...dlock.Option) *dlock.Semaphores {
	t.Helper()
	s, err := dlock.NewSemaphores(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func mustAcquire(t *testing.T, s *dlock.Semaphores, key string, limit, k int, opts ...dlock.Option) *dlock.Permit {
	t.Helper()
	p, err := s.TryAcquire(context.Background(), key, limit, k, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q, %d, %d): %v", key, limit, k, err)
	}
	return p
}

// maxOut runs 12 goroutines that each take 1 or 2 of limit permits of one
// key 5 times through Acquire, hold them a moment and release them; it
// returns the most permits out at once, counted by the holders themselves.
func maxOut(t *testing.T, store driver.Semaphore, limit int) int {
	var cur, peak atomic.Int64
	synctest.Test(t, func(t *testing.T) {
		s := newSems(t, store)
		var wg sync.WaitGroup
		for g := range 12 {
			k := 1 + g%2
			wg.Go(func() {
				for range 5 {
					p, err := s.Acquire(context.Background(), "sem", limit, k)
					if err != nil {
						t.Error(err)
						return
					}
					n := cur.Add(int64(k))
					for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
					}
					time.Sleep(time.Millisecond) // work, on the bubble's clock
					cur.Add(-int64(k))
					if err := p.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	})
	return int(peak.Load())
}

// Never more than the limit out, with many goroutines through the user
// API, both waiting by notification and by pacing; the peak reaches the
// limit (the test contends). Control: a store wrapper that ignores the
// limit lets more out, and the same count sees it.
func TestSemaphoreNeverMoreThanLimit(t *testing.T) {
	const limit = 3
	for name, store := range map[string]driver.Semaphore{
		"notify": semNotify{&semFault{Semaphore: memstore.New(nil)}},
		"pacing": &semFault{Semaphore: memstore.New(nil)},
	} {
		if peak := maxOut(t, store, limit); peak > limit || peak < limit {
			t.Errorf("%s: %d permits out at once, want exactly the limit %d at peak", name, peak, limit)
		}
	}
	if peak := maxOut(t, &semFault{Semaphore: memstore.New(nil), ignoreLimit: true}, limit); peak <= limit {
		t.Errorf("control: a store ignoring the limit let at most %d out; the count cannot see a breach", peak)
	}
}

// A waiter wakes on the release through the store's PermitNotifier: it
// gets in at the instant of the release although the holder's lease has
// long to run and its own backoff is an hour. Control: without the
// notifier it still gets in, by pacing on PermitsTakenError.Remaining,
// which takes time the notified waiter did not.
func TestSemaphoreWaiterWakesOnRelease(t *testing.T) {
	for _, notify := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var store driver.Semaphore = &semFault{Semaphore: memstore.New(nil)}
			if notify {
				store = semNotify{store.(*semFault)}
			}
			s := newSems(t, store, dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
			holder := mustAcquire(t, s, "sem", 1, 1, dlock.WithAutoRenew(10*time.Second))
			got := make(chan *dlock.Permit)
			go func() {
				p, err := s.Acquire(context.Background(), "sem", 1, 1)
				if err != nil {
					t.Error(err)
				}
				got <- p
			}()
			time.Sleep(time.Second)
			synctest.Wait() // the waiter sleeps
			if err := holder.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			p := <-got
			waited := time.Since(released)
			if notify && waited != 0 {
				t.Errorf("notified waiter got in %v after the release, want at once", waited)
			}
			if !notify && waited == 0 {
				t.Errorf("control: the pacing waiter got in at the release: the notification test proves nothing")
			}
			_ = p.Release(context.Background())
		})
	}
}

// A wait ended by its context returns ErrNotAcquired and the context's
// error (cancellation and deadline), and leaves no permit taken.
func TestSemaphoreAcquireContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSems(t, memstore.New(nil))
		holder := mustAcquire(t, s, "sem", 2, 2)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := s.Acquire(ctx, "sem", 2, 1)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait: %v, want ErrNotAcquired and context.Canceled", err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		if _, err := s.Acquire(dctx, "sem", 2, 1); !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("deadline: %v, want ErrNotAcquired and context.DeadlineExceeded", err)
		}
		_ = holder.Release(context.Background())
		mustAcquire(t, s, "sem", 2, 2) // nothing was left taken
	})
}

// Invalid arguments return ErrInvalid before any I/O. Control: a valid
// call reaches the store.
func TestSemaphoreInvalidArgs(t *testing.T) {
	f := &semFault{Semaphore: memstore.New(nil)}
	s := newSems(t, f)
	ctx := context.Background()
	cases := map[string]func() error{
		"limit 0":          func() error { _, err := s.TryAcquire(ctx, "k", 0, 1); return err },
		"permits 0":        func() error { _, err := s.TryAcquire(ctx, "k", 2, 0); return err },
		"permits > limit":  func() error { _, err := s.Acquire(ctx, "k", 2, 3); return err },
		"empty key":        func() error { _, err := s.Acquire(ctx, "", 2, 1); return err },
		"nil ctx":          func() error { _, err := s.Acquire(nil, "k", 2, 1); return err }, //nolint:staticcheck // the point
		"short ttl":        func() error { _, err := s.Acquire(ctx, "k", 2, 1, dlock.WithTTL(time.Millisecond)); return err },
		"WithRead":         func() error { _, err := s.Acquire(ctx, "k", 2, 1, dlock.WithRead("r")); return err },
		"nil store":        func() error { _, err := dlock.NewSemaphores(nil); return err },
		"bad default wait": func() error { _, err := dlock.NewSemaphores(f, dlock.WithWait(-1)); return err },
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("%d store calls for invalid arguments, want none", n)
	}
	mustAcquire(t, s, "k", 2, 1)
	if f.calls.Load() == 0 {
		t.Error("control: a valid call made no store call")
	}
}

// A limit that is not the key's while permits are out is ErrInvalid with
// the store's *LimitMismatchError, and ends a wait at once (a waiting
// Acquire in a bubble would deadlock it). Control: once none is out, the
// new limit is stored.
func TestSemaphoreLimitMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSems(t, memstore.New(nil))
		p := mustAcquire(t, s, "sem", 2, 1)
		_, err := s.Acquire(context.Background(), "sem", 3, 1)
		var lm *driver.LimitMismatchError
		if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &lm) || lm.Stored != 2 || lm.Asked != 3 {
			t.Fatalf("Acquire with another limit: %v, want ErrInvalid and LimitMismatchError{2, 3}", err)
		}
		_ = p.Release(context.Background())
		mustAcquire(t, s, "sem", 3, 3)
	})
}
