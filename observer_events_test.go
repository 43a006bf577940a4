package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []dlock.Event
}

func (r *recorder) Event(_ context.Context, e dlock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// take returns the events recorded since the last take.
func (r *recorder) take() []dlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// want is an expected event: its fields but Err, which must match err
// (errors.Is; nil: Err must be nil).
type want struct {
	e   dlock.Event
	err error
}

// expect fails the test unless got is exactly ws, in order.
func expect(t *testing.T, got []dlock.Event, ws ...want) {
	t.Helper()
	ok := len(got) == len(ws)
	for i := 0; ok && i < len(ws); i++ {
		g, w := got[i], ws[i].e
		gerr := g.Err
		g.Err, w.Err = nil, nil
		ok = g == w && (ws[i].err == nil) == (gerr == nil) && (gerr == nil || errors.Is(gerr, ws[i].err))
	}
	if !ok {
		t.Fatalf("events:\n%s\nwant:\n%s", dump(got), dumpWant(ws))
	}
}

func dump(es []dlock.Event) (s string) {
	for _, e := range es {
		s += fmt.Sprintf("  %+v\n", e)
	}
	return s
}

func dumpWant(ws []want) (s string) {
	for _, w := range ws {
		s += fmt.Sprintf("  %+v (err %v)\n", w.e, w.err)
	}
	return s
}

func lockEvent(typ dlock.EventType, key string) dlock.Event {
	return dlock.Event{Type: typ, Kind: dlock.KindLock, Key: key}
}

// A lease's life, one event each at its moment: the wait's start and end
// (the acquisition: fence, holds, waited), each renewal (lag), and the
// release (held for). A call rejected before any I/O emits nothing.
func TestObserverLeaseLifeEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, _ := newClient(t, dlock.WithObserver(rec), dlock.WithAutoRenew(300*time.Millisecond))
		ctx := testCtx(t)
		if _, err := c.Lock(ctx, ""); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("Lock(\"\"): %v", err)
		}
		expect(t, rec.take())
		l := mustLock(t, c, ctx, "k")
		acquired := lockEvent(dlock.EventWaitEnd, "k")
		acquired.Outcome, acquired.Fence, acquired.Count = dlock.OutcomeAcquired, l.Fence(), 1
		expect(t, rec.take(), want{e: lockEvent(dlock.EventWaitStart, "k")}, want{e: acquired})
		time.Sleep(250 * time.Millisecond) // renewals at 100 and 200 ms
		synctest.Wait()
		renewed := lockEvent(dlock.EventRenewed, "k")
		renewed.Fence, renewed.Count = l.Fence(), 1
		expect(t, rec.take(), want{e: renewed}, want{e: renewed})
		release(t, l)
		released := lockEvent(dlock.EventReleased, "k")
		released.Fence, released.Count, released.Held = l.Fence(), 1, 250*time.Millisecond
		expect(t, rec.take(), want{e: released})
	})
}

// Renewals that fail are each reported with their error, then the loss
// once, as it happens, with its cause; releasing the lost lease emits
// nothing more.
func TestObserverLossAfterFailedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		const ttl = 300 * time.Millisecond
		c, fs := newClient(t, dlock.WithObserver(rec), dlock.WithAutoRenew(ttl))
		l := mustLock(t, c, testCtx(t), "k")
		granted := time.Now()
		rec.take()
		fs.failExt.Store(true)
		<-l.Done()
		synctest.Wait() // the loss's event follows Done
		held := time.Since(granted)
		got := rec.take()
		if len(got) < 2 {
			t.Fatalf("events: %s want renewal failures then the loss", dump(got))
		}
		var ws []want
		for range got[:len(got)-1] {
			e := lockEvent(dlock.EventRenewFailed, "k")
			e.Fence, e.Count = l.Fence(), 1
			ws = append(ws, want{e: e, err: dlock.ErrUnavailable})
		}
		lost := lockEvent(dlock.EventLost, "k")
		lost.Fence, lost.Count, lost.Outcome, lost.Held = l.Fence(), 1, dlock.OutcomeExpired, held
		ws = append(ws, want{e: lost, err: dlock.ErrExpired})
		expect(t, got, ws...)
		if err := l.Release(testCtx(t)); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Release: %v", err)
		}
		synctest.Wait()
		expect(t, rec.take())
	})
}

// A key taken from the holder is a loss with cause "taken": found by a
// renewal, or by the release itself.
func TestObserverTakenLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, fs := newClient(t, dlock.WithObserver(rec))
		ctx := testCtx(t)
		renewed := mustLock(t, c, ctx, "a", dlock.WithAutoRenew(300*time.Millisecond))
		fixed := mustLock(t, c, ctx, "b", dlock.WithTTL(time.Second))
		rec.take()
		for _, l := range []*dlock.Lease{renewed, fixed} {
			if err := fs.Mutex.Release(ctx, l.Key(), l.Token()); err != nil {
				t.Fatal(err)
			}
		}
		<-renewed.Done()
		synctest.Wait() // the loss's event follows Done
		failed := lockEvent(dlock.EventRenewFailed, "a")
		failed.Fence, failed.Count = renewed.Fence(), 1
		lost := lockEvent(dlock.EventLost, "a")
		lost.Fence, lost.Count, lost.Outcome, lost.Held = renewed.Fence(), 1, dlock.OutcomeTaken, 100*time.Millisecond
		expect(t, rec.take(), want{e: failed, err: dlock.ErrNotHeld}, want{e: lost, err: dlock.ErrNotHeld})
		if err := fixed.Release(ctx); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Release of a taken lease: %v", err)
		}
		lost = lockEvent(dlock.EventLost, "b")
		lost.Fence, lost.Count, lost.Outcome, lost.Held = fixed.Fence(), 1, dlock.OutcomeTaken, 100*time.Millisecond
		expect(t, rec.take(), want{e: lost, err: dlock.ErrNotHeld})
	})
}

// acqFault makes Acquire fail with err, unsent, when err is set.
type acqFault struct {
	driver.Mutex
	err error
}

func (f *acqFault) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if f.err != nil {
		return driver.Grant{}, f.err
	}
	return f.Mutex.Acquire(ctx, key, token, ttl)
}

// Every way a wait ends has its outcome, and Waited is the time it took.
func TestObserverWaitOutcomes(t *testing.T) {
	cases := []struct {
		name     string
		storeErr error
		call     func(ctx context.Context, c *dlock.Client) error
		outcome  dlock.Outcome
		waited   time.Duration
	}{
		{"try contended", nil, func(ctx context.Context, c *dlock.Client) error {
			_, err := c.TryLock(ctx, "k")
			return err
		}, dlock.OutcomeContended, 0},
		{"wait bound", nil, func(ctx context.Context, c *dlock.Client) error {
			_, err := c.Lock(ctx, "k", dlock.WithWait(50*time.Millisecond))
			return err
		}, dlock.OutcomeTimedOut, 50 * time.Millisecond},
		{"deadline", nil, func(ctx context.Context, c *dlock.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
			defer cancel()
			_, err := c.Lock(ctx, "k")
			return err
		}, dlock.OutcomeTimedOut, 40 * time.Millisecond},
		{"cancelled", nil, func(ctx context.Context, c *dlock.Client) error {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(30*time.Millisecond, cancel)
			_, err := c.Lock(ctx, "k")
			return err
		}, dlock.OutcomeCancelled, 30 * time.Millisecond},
		{"unavailable", errDown, func(ctx context.Context, c *dlock.Client) error {
			_, err := c.Lock(ctx, "k", dlock.WithWait(20*time.Millisecond))
			return err
		}, dlock.OutcomeUnavailable, 20 * time.Millisecond},
		{"refused", dlock.ErrRefused, func(ctx context.Context, c *dlock.Client) error {
			_, err := c.Lock(ctx, "k")
			return err
		}, dlock.OutcomeRefused, 0},
		{"closed", nil, func(ctx context.Context, c *dlock.Client) error {
			time.AfterFunc(30*time.Millisecond, func() { _ = c.Close(ctx) })
			_, err := c.Lock(ctx, "k")
			return err
		}, dlock.OutcomeCancelled, 30 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New(nil)
				mustLock(t, newClientOn(t, st), testCtx(t), "k") // another owner holds k
				rec := &recorder{}
				c := newClientOn(t, &acqFault{Mutex: st, err: tc.storeErr}, dlock.WithObserver(rec))
				err := tc.call(testCtx(t), c)
				if !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("call: %v, want ErrNotAcquired", err)
				}
				end := lockEvent(dlock.EventWaitEnd, "k")
				end.Outcome, end.Waited = tc.outcome, tc.waited
				expect(t, rec.take(), want{e: lockEvent(dlock.EventWaitStart, "k")}, want{e: end, err: dlock.ErrNotAcquired})
			})
		})
	}
}

// A release that hands the lock to a local waiter reports the handoff
// (the releaser's fence and hold time), and the waiter's wait ends
// acquired with the new holding's fence.
func TestObserverHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c := newClientOn(t, memstore.New(nil), dlock.WithObserver(rec))
		ctx := testCtx(t)
		first := mustLock(t, c, ctx, "k")
		got := make(chan *dlock.Lease)
		go func() { got <- mustLock(t, c, ctx, "k") }()
		synctest.Wait() // the waiter is queued
		rec.take()
		time.Sleep(10 * time.Millisecond)
		release(t, first)
		next := <-got
		if next.Fence() <= first.Fence() {
			t.Fatalf("fences %d then %d", first.Fence(), next.Fence())
		}
		handoff := lockEvent(dlock.EventHandedOff, "k")
		handoff.Fence, handoff.Count, handoff.Held = first.Fence(), 1, 10*time.Millisecond
		end := lockEvent(dlock.EventWaitEnd, "k")
		end.Outcome, end.Fence, end.Count, end.Waited = dlock.OutcomeAcquired, next.Fence(), 1, 10*time.Millisecond
		expect(t, rec.take(), want{e: handoff}, want{e: end})
		release(t, next)
	})
}

// WithObserver passed to a call observes that call and its lease only;
// a nil Observer observes nothing.
func TestObserverPerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, _ := newClient(t)
		ctx := testCtx(t)
		release(t, mustLock(t, c, ctx, "a"))
		release(t, mustLock(t, c, ctx, "b", dlock.WithObserver(nil)))
		expect(t, rec.take())
		l := mustLock(t, c, ctx, "c", dlock.WithObserver(rec))
		release(t, l)
		acquired := lockEvent(dlock.EventWaitEnd, "c")
		acquired.Outcome, acquired.Fence, acquired.Count = dlock.OutcomeAcquired, l.Fence(), 1
		released := lockEvent(dlock.EventReleased, "c")
		released.Fence, released.Count = l.Fence(), 1
		expect(t, rec.take(), want{e: lockEvent(dlock.EventWaitStart, "c")}, want{e: acquired}, want{e: released})
		// The Client's own observer is replaced, not joined, by the call's.
		other := &recorder{}
		c2, _ := newClient(t, dlock.WithObserver(other))
		release(t, mustLock(t, c2, ctx, "d", dlock.WithObserver(rec)))
		if n, m := len(other.take()), len(rec.take()); n != 0 || m != 3 {
			t.Fatalf("the Client's observer got %d events, the call's %d; want 0 and 3", n, m)
		}
	})
}

// Client.Close loses the leases it ends, with outcome "closed".
func TestObserverCloseLosesLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, err := dlock.New(memstore.New(nil), dlock.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		l := mustLock(t, c, testCtx(t), "k")
		rec.take()
		time.Sleep(time.Millisecond)
		if err := c.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		lost := lockEvent(dlock.EventLost, "k")
		lost.Fence, lost.Count, lost.Outcome, lost.Held = l.Fence(), 1, dlock.OutcomeClosed, time.Millisecond
		expect(t, rec.take(), want{e: lost, err: dlock.ErrInvalid})
	})
}
