package dlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

func limitEvent(typ dlock.EventType, n int, o dlock.Outcome) dlock.Event {
	return dlock.Event{Type: typ, Kind: dlock.KindLimit, Key: "k", Count: n, Outcome: o}
}

// A Limiter reports each decision (allowed; denied with RetryAfter;
// invalid, before any I/O or from the store) and, for Wait, the wait's
// start and end around the decisions it took: a denial, then the
// admission a RetryAfter later. Times are exact in the bubble.
func TestLimiterEventsPerDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 1},
			dlock.WithLimiterObserver(rec))
		ctx := context.Background()
		allow(t, l, "k", 1)
		allow(t, l, "k", 1)
		denied := limitEvent(dlock.EventLimitDecision, 1, dlock.OutcomeDenied)
		denied.RetryAfter = time.Second
		expect(t, rec.take(),
			want{e: limitEvent(dlock.EventLimitDecision, 1, dlock.OutcomeAllowed)},
			want{e: denied})

		if err := l.Wait(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		end := limitEvent(dlock.EventWaitEnd, 1, dlock.OutcomeAllowed)
		end.Waited = time.Second
		expect(t, rec.take(),
			want{e: dlock.Event{Type: dlock.EventWaitStart, Kind: dlock.KindLimit, Key: "k"}},
			want{e: denied},
			want{e: limitEvent(dlock.EventLimitDecision, 1, dlock.OutcomeAllowed)},
			want{e: end})

		if _, err := l.AllowN(ctx, "k", 0); err == nil {
			t.Fatal("AllowN(0) succeeded")
		}
		if err := l.WaitN(ctx, "k", 2); err == nil {
			t.Fatal("WaitN above the burst succeeded")
		}
		expect(t, rec.take(),
			want{e: limitEvent(dlock.EventLimitDecision, 0, dlock.OutcomeInvalid), err: dlock.ErrInvalid},
			want{e: dlock.Event{Type: dlock.EventWaitStart, Kind: dlock.KindLimit, Key: "k"}},
			want{e: limitEvent(dlock.EventLimitDecision, 2, dlock.OutcomeInvalid), err: dlock.ErrInvalid},
			want{e: limitEvent(dlock.EventWaitEnd, 2, dlock.OutcomeInvalid), err: dlock.ErrInvalid})
	})
}

// eventSink keeps the last event boxed: an Observer that allocates once
// per event, for the controls of allocation counts.
var eventSink any

// allowAllocs is what one Allow on memstore allocates through l.
func allowAllocs(t *testing.T, l *dlock.Limiter) float64 {
	ctx := context.Background()
	return testing.AllocsPerRun(500, func() {
		if _, err := l.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	})
}

// Without an Observer, Allow allocates what it did before limiter events
// existed: nothing. Control: an Observer that keeps the events makes the
// same count see its allocation (one per event).
func TestLimiterNoObserverAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	lim := dlock.RateLimit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	if n := allowAllocs(t, newLimiter(t, memstore.New(nil), lim)); n != 0 {
		t.Fatalf("Allow without an Observer: %v allocations, want 0", n)
	}
	if n := allowAllocs(t, newLimiter(t, memstore.New(nil), lim, dlock.WithLimiterObserver(dlock.ObserverFunc(func(_ context.Context, e dlock.Event) { eventSink = e })))); n == 0 {
		t.Fatal("control: Allow with an allocating Observer: 0 allocations")
	} else {
		t.Logf("Allow with an Observer that boxes each event: %v allocations", n)
	}
}
