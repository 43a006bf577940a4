package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A permit whose renewals fail is lost when its validity runs out: Done is
// closed exactly the margin before ValidUntil (the bubble's timers are
// punctual) and Err matches ErrLost, ErrExpired and the renewal's
// ErrUnavailable. Control: with renewals working, the same time passes and
// the permit is still held, its validity moved on.
func TestPermitLostWhenRenewalsFail(t *testing.T) {
	for _, fail := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const ttl = 300 * time.Millisecond
			f := &semFault{Semaphore: memstore.New(nil)}
			s := newSems(t, f, dlock.WithAutoRenew(ttl))
			p := mustAcquire(t, s, "sem", 2, 1)
			vu := p.ValidUntil()
			f.failExt.Store(fail)
			margin := min(5*time.Millisecond, ttl/10)
			time.Sleep(time.Until(vu.Add(-margin)))
			synctest.Wait()
			if !fail {
				if err := p.Err(); err != nil || !p.ValidUntil().After(vu) {
					t.Fatalf("control: renewed permit: Err %v, ValidUntil moved %v, want held and moved on", err, p.ValidUntil().Sub(vu))
				}
				return
			}
			select {
			case <-p.Done():
			default:
				t.Fatalf("Done still open %v before ValidUntil", time.Until(vu))
			}
			err := p.Err()
			if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) || !errors.Is(err, dlock.ErrUnavailable) {
				t.Fatalf("Err: %v, want ErrLost, ErrExpired and ErrUnavailable", err)
			}
			if err := p.Release(context.Background()); !errors.Is(err, dlock.ErrLost) {
				t.Fatalf("Release of a lost permit: %v, want ErrLost", err)
			}
		})
	}
}

// A crashed holder's permit (never renewed, its give-back never arrives) comes back
// when its own lease ends on the store's clock, while another holder of the
// key keeps renewing: a waiter gets in within a few milliseconds of the
// crashed lease's end (pacing on PermitsTakenError.Remaining), and the
// renewing holder still holds. Control: a moment before that end, a try
// fails.
func TestSemaphoreCrashedHolderComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		cf := &semFault{Semaphore: store}
		crashed := newSems(t, cf, dlock.WithTTL(time.Second))
		alive := newSems(t, store, dlock.WithAutoRenew(300*time.Millisecond))
		waiter := newSems(t, &semFault{Semaphore: store}) // paces: no notifier
		mustAcquire(t, crashed, "sem", 2, 1)
		cf.down.Store(true) // the crash: nothing it sends reaches the store
		start := time.Now()
		keeper := mustAcquire(t, alive, "sem", 2, 1)
		got := make(chan *dlock.Permit)
		go func() {
			p, err := waiter.Acquire(context.Background(), "sem", 2, 1)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		time.Sleep(time.Second - time.Millisecond)
		if _, err := alive.TryAcquire(context.Background(), "sem", 2, 1); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("control: a try before the crashed lease ended: %v, want ErrNotAcquired", err)
		}
		p := <-got
		if d := time.Since(start); d < time.Second || d > time.Second+50*time.Millisecond {
			t.Errorf("waiter got in %v after the crash, want within 50ms of the crashed lease's 1s", d)
		}
		if err := keeper.Err(); err != nil {
			t.Errorf("the renewing holder: %v, want held", err)
		}
		_ = p.Release(context.Background())
	})
}

// Close releases what the Semaphores holds (Err then matches ErrNotHeld),
// and later calls return ErrInvalid. Control: before Close, the permits are
// out (another Semaphores' try fails).
func TestSemaphoresCloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		s, err := dlock.NewSemaphores(store)
		if err != nil {
			t.Fatal(err)
		}
		other := newSems(t, store)
		p := mustAcquire(t, s, "sem", 3, 2)
		q := mustAcquire(t, s, "sem", 3, 1)
		if _, err := other.TryAcquire(context.Background(), "sem", 3, 1); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("control: try while all permits are out: %v, want ErrNotAcquired", err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*dlock.Permit{p, q} {
			if err := p.Err(); !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("permit after Close: %v, want ErrNotHeld", err)
			}
		}
		mustAcquire(t, other, "sem", 3, 3)
		if _, err := s.TryAcquire(context.Background(), "sem", 3, 1); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("TryAcquire after Close: %v, want ErrInvalid", err)
		}
	})
}

// Release with an ended context returns its error and gives the permits
// back in the background: they are free again at once, not at the end of
// their lease. Control: the release sent on the ended context did not free
// them (memstore refuses a done ctx).
func TestPermitReleaseEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		s := newSems(t, store, dlock.WithTTL(time.Hour))
		p := mustAcquire(t, s, "sem", 1, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := store.ExtendPermits(ctx, "sem", "x", time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("control: memstore on a done ctx: %v, want its error", err)
		}
		if err := p.Release(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release(ended ctx): %v, want context.Canceled", err)
		}
		synctest.Wait() // the give-back
		mustAcquire(t, s, "sem", 1, 1)
	})
}

// Extend sets the holding's expiry: a shorter Extend moves ValidUntil back
// and the permit, no longer renewed (WithTTL), is lost at its new end.
func TestPermitExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSems(t, memstore.New(nil), dlock.WithTTL(time.Hour))
		p := mustAcquire(t, s, "sem", 1, 1)
		if err := p.Extend(context.Background(), 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if r := p.Remaining(); r > 100*time.Millisecond {
			t.Fatalf("Remaining %v after Extend(100ms)", r)
		}
		<-p.Done()
		if err := p.Extend(context.Background(), time.Second); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Extend of a lost permit: %v, want ErrLost", err)
		}
		if _, err := s.Acquire(context.Background(), "sem", 1, 1); err != nil {
			t.Fatal(err)
		}
	})
}

// A grant whose reply arrives after Close began (and listed what to
// release) is released at once, and the Acquire fails with ErrNotAcquired
// and ErrInvalid: Close leaves no permit held and renewed behind it.
// Control: the same grant without Close is held.
func TestSemaphoresCloseDuringAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		f := &semFault{Semaphore: store}
		s := newSems(t, f)
		other := newSems(t, store)
		p := mustAcquire(t, s, "sem", 1, 1)
		if _, err := other.TryAcquire(context.Background(), "sem", 1, 1); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("control: the grant is held: try got %v, want ErrNotAcquired", err)
		}
		_ = p.Release(context.Background())
		f.afterGrant = func() { _ = s.Close(context.Background()) }
		_, err := s.Acquire(context.Background(), "sem", 1, 1)
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("Acquire closed mid-call: %v, want ErrNotAcquired and ErrInvalid", err)
		}
		mustAcquire(t, other, "sem", 1, 1)
	})
}

// Close ends a waiting Acquire at once (no time passes on the bubble's
// clock), with ErrNotAcquired and ErrInvalid; a sleep Close did not end
// would last until the holder's hour-long lease ran out.
func TestSemaphoresCloseEndsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		s := newSems(t, store, dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
		holder := newSems(t, store, dlock.WithTTL(time.Hour))
		mustAcquire(t, holder, "sem", 1, 1)
		errc := make(chan error)
		go func() {
			_, err := s.Acquire(context.Background(), "sem", 1, 1)
			errc <- err
		}()
		synctest.Wait()
		closed := time.Now()
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		if d := time.Since(closed); d != 0 {
			t.Errorf("Acquire ended %v after Close, want at once", d)
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("Acquire ended by Close: %v, want ErrNotAcquired and ErrInvalid", err)
		}
	})
}
