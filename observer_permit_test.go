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

func permitEvent(typ dlock.EventType, key string, p *dlock.Permit) dlock.Event {
	e := dlock.Event{Type: typ, Kind: dlock.KindPermit, Key: key}
	if p != nil {
		e.Fence, e.Count = p.Fence(), p.Permits()
	}
	return e
}

// A permit's life, as a lease's, with kind "permit" and Count its
// permits: the wait, a try that meets a full semaphore, renewals, failed
// renewals and the loss, a release.
func TestObserverPermitEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		f := &semFault{Semaphore: memstore.New(nil)}
		s := newSems(t, f, dlock.WithObserver(rec), dlock.WithAutoRenew(300*time.Millisecond))
		p := mustAcquire(t, s, "sem", 3, 2)
		granted := time.Now()
		acquired := permitEvent(dlock.EventWaitEnd, "sem", p)
		acquired.Outcome = dlock.OutcomeAcquired
		expect(t, rec.take(), want{e: permitEvent(dlock.EventWaitStart, "sem", nil)}, want{e: acquired})

		if _, err := s.TryAcquire(testCtx(t), "sem", 3, 2); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a full semaphore: %v", err)
		}
		full := permitEvent(dlock.EventWaitEnd, "sem", nil)
		full.Outcome = dlock.OutcomeContended
		expect(t, rec.take(), want{e: permitEvent(dlock.EventWaitStart, "sem", nil)}, want{e: full, err: dlock.ErrNotAcquired})

		if _, err := s.TryAcquire(testCtx(t), "sem", 4, 1); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("TryAcquire with another limit: %v, want ErrInvalid", err)
		}
		invalid := permitEvent(dlock.EventWaitEnd, "sem", nil)
		invalid.Outcome = dlock.OutcomeInvalid
		expect(t, rec.take(), want{e: permitEvent(dlock.EventWaitStart, "sem", nil)}, want{e: invalid, err: dlock.ErrInvalid})

		time.Sleep(150 * time.Millisecond)
		expect(t, rec.take(), want{e: permitEvent(dlock.EventRenewed, "sem", p)})

		one := mustAcquire(t, s, "sem", 3, 1)
		rec.take()
		f.failExt.Store(true)
		<-p.Done()
		synctest.Wait() // the loss's event follows Done
		got := rec.take()
		var ws []want
		for _, e := range got {
			if e.Type == dlock.EventRenewFailed && e.Key == "sem" {
				w := permitEvent(dlock.EventRenewFailed, "sem", p)
				if e.Count == 1 {
					w = permitEvent(dlock.EventRenewFailed, "sem", one)
				}
				ws = append(ws, want{e: w, err: dlock.ErrUnavailable})
			}
		}
		lost := permitEvent(dlock.EventLost, "sem", p)
		lost.Outcome, lost.Held = dlock.OutcomeExpired, time.Since(granted)
		ws = append(ws, want{e: lost, err: dlock.ErrExpired})
		if len(ws) < 3 {
			t.Fatalf("events: %s want failed renewals then the loss", dump(got))
		}
		expect(t, got, ws...)

		f.failExt.Store(false)
		if err := one.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		released := permitEvent(dlock.EventReleased, "sem", one)
		released.Held = time.Since(granted) - 150*time.Millisecond
		expect(t, rec.take(), want{e: released})
	})
}
