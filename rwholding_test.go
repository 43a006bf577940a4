package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// A holding whose renewals fail is lost when its validity runs out: Done is
// closed the margin before ValidUntil and Err matches ErrLost, ErrExpired
// and the renewal's ErrUnavailable. Control: with renewals working, the
// same time passes and the holding is still held, its validity moved on.
func TestRWHoldingLostWhenRenewalsFail(t *testing.T) {
	for _, fail := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const ttl = 300 * time.Millisecond
			f := newRWFault()
			l := newRWLocks(t, f, dlock.WithAutoRenew(ttl))
			h := mustTry(t, l, "k", driver.RWRead)
			vu := h.ValidUntil()
			f.failExt.Store(fail)
			time.Sleep(time.Until(vu.Add(-min(5*time.Millisecond, ttl/10))))
			synctest.Wait()
			if !fail {
				if err := h.Err(); err != nil || !h.ValidUntil().After(vu) {
					t.Fatalf("control: renewed holding: Err %v, ValidUntil moved %v, want held and moved on", err, h.ValidUntil().Sub(vu))
				}
				return
			}
			select {
			case <-h.Done():
			default:
				t.Fatalf("Done still open %v before ValidUntil", time.Until(vu))
			}
			err := h.Err()
			if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) || !errors.Is(err, dlock.ErrUnavailable) {
				t.Fatalf("Err: %v, want ErrLost, ErrExpired and ErrUnavailable", err)
			}
			if err := h.Release(context.Background()); !errors.Is(err, dlock.ErrLost) {
				t.Fatalf("Release of a lost holding: %v, want ErrLost", err)
			}
		})
	}
}

// A crashed reader's holding (never renewed, its release never arrives)
// ends at its own lease on the store's clock while another reader keeps
// renewing: a writer waiting since the renewing reader left gets in within
// a few milliseconds of the crashed lease's end. Control: a moment before
// that end the store still has the crashed holding.
func TestRWDeadReaderExpiresWhileOtherRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRWFault()
		crashed := newRWLocks(t, f, dlock.WithTTL(time.Second))
		alive := newRWLocks(t, f.Store, dlock.WithAutoRenew(300*time.Millisecond))
		writer := newRWLocks(t, newRWFaultOn(f)) // paces: no notifier
		mustTry(t, crashed, "k", driver.RWRead)
		f.down.Store(true) // the crash: nothing it sends reaches the store
		start := time.Now()
		keeper := mustTry(t, alive, "k", driver.RWRead)
		time.Sleep(600 * time.Millisecond) // the keeper renews twice
		if err := keeper.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan *dlock.RWHolding)
		go func() {
			h, err := writer.Lock(context.Background(), "k")
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		time.Sleep(time.Until(start.Add(time.Second - time.Millisecond)))
		if info, _ := f.Store.InspectRW(context.Background(), "k"); len(info.Holders) != 1 {
			t.Fatalf("control: %d holdings a moment before the crashed lease ends, want the crashed one", len(info.Holders))
		}
		h := <-got
		if d := time.Since(start); d < time.Second || d > time.Second+50*time.Millisecond {
			t.Errorf("writer got in %v after the crash, want within 50ms of the crashed lease's 1s", d)
		}
		_ = h.Release(context.Background())
	})
}

// newRWFaultOn is a second wrapper of f's store, sharing its state but not
// its faults.
func newRWFaultOn(f *rwFault) *rwFault { return &rwFault{Store: f.Store} }

// A waiter wakes on the release through the store's RWNotifier: it gets in
// at the instant of the release although the holder's lease has long to
// run and its own backoff is an hour. Control: without the notifier it
// still gets in, by pacing, which takes time the notified waiter did not.
func TestRWWaiterWakesOnRelease(t *testing.T) {
	for _, notify := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			l := newRWLocks(t, rwStore(newRWFault(), notify), dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
			holder := mustTry(t, l, "k", driver.RWWrite, dlock.WithAutoRenew(10*time.Second))
			got := make(chan *dlock.RWHolding)
			go func() {
				h, err := l.RLock(context.Background(), "k")
				if err != nil {
					t.Error(err)
				}
				got <- h
			}()
			time.Sleep(time.Second)
			synctest.Wait() // the waiter sleeps
			if err := holder.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			h := <-got
			waited := time.Since(released)
			if notify && waited != 0 {
				t.Errorf("notified waiter got in %v after the release, want at once", waited)
			}
			if !notify && waited == 0 {
				t.Errorf("control: the pacing waiter got in at the release: the notification test proves nothing")
			}
			_ = h.Release(context.Background())
		})
	}
}

// A wait ended by its context returns ErrNotAcquired and the context's
// error; a wait bound ends a wait independently of the lease, with
// ErrNotAcquired and no context error. Neither leaves a holding.
func TestRWWaitEndsByContextOrBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, newRWFault())
		holder := mustTry(t, l, "k", driver.RWWrite)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := l.RLock(ctx, "k")
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait: %v, want ErrNotAcquired and context.Canceled", err)
		}
		t0 := time.Now()
		_, err := l.Lock(context.Background(), "k", dlock.WithWait(1500*time.Millisecond))
		if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 1500*time.Millisecond {
			t.Errorf("wait bound: %v after %v, want ErrNotAcquired without a context error after 1.5s", err, time.Since(t0))
		}
		_ = holder.Release(context.Background())
		time.Sleep(driver.WriterWaitTTL) // the given-up writer's mark ends
		mustTry(t, l, "k", driver.RWRead)
	})
}

// Release with an ended context returns its error and gives the holding
// back in the background: the key is free again at once, not at the end of
// its lease.
func TestRWReleaseEndedContextGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, newRWFault(), dlock.WithTTL(time.Hour))
		h := mustTry(t, l, "k", driver.RWWrite)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.Release(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release(ended ctx): %v, want context.Canceled", err)
		}
		synctest.Wait() // the give-back
		mustTry(t, l, "k", driver.RWWrite)
	})
}

// A shorter Extend moves ValidUntil back and the holding, not renewed
// (WithTTL), is lost at its new end, freeing the key; Extend then reports
// ErrLost.
func TestRWExtendShorter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, newRWFault(), dlock.WithTTL(time.Hour))
		h := mustTry(t, l, "k", driver.RWWrite)
		if err := h.Extend(context.Background(), 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if r := h.Remaining(); r > 100*time.Millisecond {
			t.Fatalf("Remaining %v after Extend(100ms)", r)
		}
		<-h.Done()
		if err := h.Extend(context.Background(), time.Second); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Extend of a lost holding: %v, want ErrLost", err)
		}
		time.Sleep(10 * time.Millisecond) // past the store's expiry
		mustTry(t, l, "k", driver.RWRead)
	})
}

// Close releases what the RWLocks holds (Err then matches ErrNotHeld), ends
// a waiting Lock at once with ErrNotAcquired and ErrInvalid, and later
// calls return ErrInvalid. Control: before Close, the holdings keep
// another RWLocks' writer out.
func TestRWLocksCloseEndsWaitsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRWFault()
		l, err := dlock.NewRWLocks(f, dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
		if err != nil {
			t.Fatal(err)
		}
		other := newRWLocks(t, f.Store)
		r1 := mustTry(t, l, "k", driver.RWRead, dlock.WithTTL(time.Hour))
		r2 := mustTry(t, l, "k", driver.RWRead, dlock.WithTTL(time.Hour))
		if _, err := other.TryLock(context.Background(), "k"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("control: a writer while two readers hold: %v, want ErrNotAcquired", err)
		}
		errc := make(chan error)
		go func() {
			_, err := l.Lock(context.Background(), "k")
			errc <- err
		}()
		synctest.Wait()
		closed := time.Now()
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrInvalid) || time.Since(closed) != 0 {
			t.Errorf("Lock ended by Close: %v after %v, want ErrNotAcquired and ErrInvalid at once", err, time.Since(closed))
		}
		for _, h := range []*dlock.RWHolding{r1, r2} {
			if err := h.Err(); !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("holding after Close: %v, want ErrNotHeld", err)
			}
		}
		if info, _ := f.Store.InspectRW(context.Background(), "k"); len(info.Holders) != 0 {
			t.Errorf("%d holdings left in the store after Close, want none", len(info.Holders))
		}
		if _, err := l.TryRLock(context.Background(), "k"); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("TryRLock after Close: %v, want ErrInvalid", err)
		}
	})
}
