package cmp

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestScheduleIsSeededPoisson: a seed replays the same arrivals, another
// process index draws others, and the count over 10 s at 1000/s is within
// 5 standard deviations of 10 000.
func TestScheduleIsSeededPoisson(t *testing.T) {
	a := Arrivals{Rate: 1000, Seed: 42}
	s0, s0again, s1 := a.Schedule(0, 10*time.Second), a.Schedule(0, 10*time.Second), a.Schedule(1, 10*time.Second)
	if !slices.Equal(s0, s0again) || slices.Equal(s0, s1) {
		t.Fatal("the schedule is not a function of the seed and the process")
	}
	if n := len(s0); n < 9500 || n > 10500 {
		t.Errorf("%d arrivals in 10 s at 1000/s", n)
	}
	if !slices.IsSorted(s0) || s0[len(s0)-1] >= 10*time.Second {
		t.Error("arrivals out of order or past the end")
	}
	if len((Arrivals{Rate: 0}).Schedule(0, time.Second)) != 0 {
		t.Error("a zero rate scheduled arrivals")
	}
}

// chanLock is an in-process lock; stall, if set, holds up the first grant.
func chanLock(stall <-chan time.Time) LockFn {
	ch := make(chan struct{}, 1)
	first := true
	return func(ctx context.Context, _ string) (func(context.Context) error, error) {
		select {
		case ch <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if first && stall != nil {
			first = false
			<-stall
		}
		return func(context.Context) error { <-ch; return nil }, nil
	}
}

// TestOpenLoopCountsFromArrival: one worker, whose first grant stalls
// 60 ms; the requests that arrived 1 and 2 ms after it waited for it, and
// their waits are measured from their arrival (at least 60 ms less the
// 2 ms), not from when they got the worker (about 0 ms: what a closed loop
// would report). Every request is counted once, none overlaps.
func TestOpenLoopCountsFromArrival(t *testing.T) {
	var tally Tally
	sched := []time.Duration{0, time.Millisecond, 2 * time.Millisecond}
	tally.OpenLoop(sched, 3*time.Millisecond, []LockFn{chanLock(time.After(60 * time.Millisecond))}, "k", t.TempDir(), nil)
	if tally.Ops != 3 || tally.Late != 0 || tally.Failures != 0 || tally.Overlaps != 0 || len(tally.Wait) != 3 || len(tally.Lat) != 3 {
		t.Fatalf("tally %+v", tally)
	}
	waits := slices.Clone(tally.Wait)
	slices.Sort(waits)
	for _, w := range waits {
		if time.Duration(w) < 58*time.Millisecond {
			t.Errorf("a wait of %v: not measured from the scheduled arrival (waits %v)", time.Duration(w), waits)
		}
	}
	for i := range tally.Wait {
		if tally.Wait[i] > tally.Lat[i] {
			t.Errorf("wait %d > whole %d", tally.Wait[i], tally.Lat[i])
		}
	}
}

func TestQuantilesOf(t *testing.T) {
	var ns []int64
	for i := int64(1); i <= 1000; i++ {
		ns = append(ns, i)
	}
	if q := QuantilesOf(ns); q.P50 != 500 || q.P99 != 990 || q.P999 != 999 {
		t.Errorf("%+v", q)
	}
	if (QuantilesOf(nil) != Quantiles{}) {
		t.Error("quantiles of nothing")
	}
}
