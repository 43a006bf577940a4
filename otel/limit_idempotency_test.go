package dlockotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// limitAndGuard runs, on memstore, a Limiter (two admissions, a denial, a
// Wait that waits one denial) and a Guard (executed, replayed, mismatch),
// observed by o.
func limitAndGuard(t *testing.T, o dlock.Observer) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memstore.New(nil)
		l, err := dlock.NewLimiter(store, dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 1}, dlock.WithLimiterObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := l.Allow(ctx, "user-1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Wait(ctx, "user-1"); err != nil {
			t.Fatal(err)
		}
		g, err := dlock.NewGuard(store, time.Hour, dlock.WithObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		run := func(context.Context, dlock.Execution) ([]byte, error) { return []byte("ok"), nil }
		_, _ = g.Do(ctx, "order-1", "fp", run)
		_, _ = g.Do(ctx, "order-1", "fp", run)
		_, _ = g.Do(ctx, "order-1", "other", run)
	})
}

// A Limiter's decisions are counted by outcome (the Wait's tries too) and
// its wait recorded as a wait that is no error; a Guard's calls are
// counted by outcome. No point has the key by default; with
// WithKeyAttribute every one has it.
func TestLimitDecisionsAndIdempotencyResults(t *testing.T) {
	s := newSink()
	limitAndGuard(t, s.observer(t))
	ms := s.metrics(t)
	limit := dlockotel.AttrKind.String("limit")
	for o, n := range map[string]float64{"allowed": 2, "denied": 2} {
		if p := find(t, ms, dlockotel.MetricLimitDecisions, limit, dlockotel.AttrOutcome.String(o)); p.value != n {
			t.Errorf("%s %s = %v, want %v", dlockotel.MetricLimitDecisions, o, p.value, n)
		}
	}
	if p := find(t, ms, dlockotel.MetricWaitDuration, limit, dlockotel.AttrOutcome.String("allowed")); p.count != 1 || !near(p.value, time.Second, 0) {
		t.Errorf("limiter wait: %d waits, %vs; want 1 of 1s", p.count, p.value)
	}
	idem := dlockotel.AttrKind.String("idempotency")
	for _, o := range []string{"executed", "replayed", "mismatch"} {
		if p := find(t, ms, dlockotel.MetricIdempotencyResults, idem, dlockotel.AttrOutcome.String(o)); p.value != 1 {
			t.Errorf("%s %s = %v, want 1", dlockotel.MetricIdempotencyResults, o, p.value)
		}
	}
	if sp := s.span(t, "dlock.Wait", dlockotel.AttrKind, "limit"); sp.Status().Code == codes.Error {
		t.Errorf("an admitted wait's call span has status %v", sp.Status())
	}
	if mstrs, sstrs := s.strings(t); holdsKey(mstrs) || holdsKey(sstrs) {
		t.Fatalf("the key is recorded by default:\n%s", dumpMetrics(ms))
	}

	s = newSink()
	limitAndGuard(t, s.observer(t, dlockotel.WithKeyAttribute()))
	ms = s.metrics(t)
	find(t, ms, dlockotel.MetricLimitDecisions, limit, dlockotel.AttrOutcome.String("denied"), dlockotel.AttrKey.String("user-1"))
	find(t, ms, dlockotel.MetricIdempotencyResults, idem, dlockotel.AttrOutcome.String("replayed"), dlockotel.AttrKey.String("order-1"))
}
