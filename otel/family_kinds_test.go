package dlockotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// Permits and read holdings are counted under their own kinds: two
// holdings of permits and two readers are each 2 in dlock.held while held
// (a holding of 2 permits counts once), 0 after; a TryAcquire beyond the
// limit is a contended wait of kind permit.
func TestPermitAndReadKinds(t *testing.T) {
	s := newSink()
	var heldWhile map[string][]point
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		o := dlock.WithObserver(s.observer(t))
		sems, err := dlock.NewSemaphores(store, o)
		if err != nil {
			t.Fatal(err)
		}
		defer sems.Close(context.Background())
		rw, err := dlock.NewRWLocks(store, o)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close(context.Background())
		ctx := context.Background()
		var ends []func(context.Context) error
		for _, n := range []int{2, 1} {
			p, err := sems.Acquire(ctx, "pool", 3, n)
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, p.Release)
		}
		if _, err := sems.TryAcquire(ctx, "pool", 3, 1); err == nil {
			t.Fatal("a 4th permit of 3 was granted")
		}
		for range 2 {
			h, err := rw.RLock(ctx, "doc")
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, h.Release)
		}
		heldWhile = s.metrics(t)
		time.Sleep(50 * time.Millisecond)
		for _, end := range ends {
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	permit, read := dlockotel.AttrKind.String("permit"), dlockotel.AttrKind.String("read")
	for _, kind := range []string{"permit", "read"} {
		k := dlockotel.AttrKind.String(kind)
		if p := find(t, heldWhile, dlockotel.MetricHeld, k); p.value != 2 {
			t.Errorf("dlock.held{%s} while held = %g, want 2", kind, p.value)
		}
	}
	ms := s.metrics(t)
	for _, kind := range []string{"permit", "read"} {
		k := dlockotel.AttrKind.String(kind)
		if p := find(t, ms, dlockotel.MetricHeld, k); p.value != 0 {
			t.Errorf("dlock.held{%s} after the releases = %g, want 0", kind, p.value)
		}
		if p := find(t, ms, dlockotel.MetricHoldDuration, k); p.count != 2 || !near(p.value, 100*time.Millisecond, time.Millisecond) {
			t.Errorf("%s holds: %d summing %gs, want 2 summing 0.1s", kind, p.count, p.value)
		}
	}
	if p := find(t, ms, dlockotel.MetricWaitDuration, permit, dlockotel.AttrOutcome.String("contended")); p.count != 1 {
		t.Errorf("contended permit waits: %d, want 1", p.count)
	}
	if p := find(t, ms, dlockotel.MetricWaitDuration, read, dlockotel.AttrOutcome.String("acquired")); p.count != 2 {
		t.Errorf("acquired read waits: %d, want 2", p.count)
	}
}
