package clienttest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
)

// Holdings of one Owner on one key share one store record: an Extend or a
// renewal of one of them must never shorten the record under another that
// still reports itself valid (issue 23, schedules a, b and c). Each runs
// with another client (its own connection, if the store has them) polling
// TryLock throughout; an acquisition while a holding of the owner reports
// itself valid is an overlap. Negative control: the same schedule over a
// store that keeps keys for a hundredth of what it is asked (broken
// expiry) shows overlaps, so the poller can see them.

// NestedHoldingsNeverShortenEachOther runs the three schedules, each with
// its control, in subtests; stores returns the holder's and the other
// client's store, of one server, for a subtest. With bubble, each subtest
// runs in a testing/synctest bubble (stores is called inside it: a store
// reading time.Now then runs on the bubble's clock), else they run in
// parallel on the real clock.
func NestedHoldingsNeverShortenEachOther(t *testing.T, bubble bool, stores func(t *testing.T) (holder, other driver.Mutex)) {
	schedules := map[string]func(*testing.T, *dlock.Client, *dlock.Client, bool) (int, error){
		"a-inner-extend-shorter": scheduleA, "b-nested-do-short-renewal": scheduleB, "c-outer-renewal-shorter": scheduleC,
	}
	for name, run := range schedules {
		for _, broken := range []bool{false, true} {
			t.Run(name+map[bool]string{true: "/control-broken-expiry"}[broken], func(t *testing.T) {
				if bubble {
					synctest.Test(t, func(t *testing.T) { nested(t, stores, run, broken) })
				} else {
					t.Parallel()
					nested(t, stores, run, broken)
				}
			})
		}
	}
}

// nested runs one schedule, or its control if broken.
func nested(t *testing.T, stores func(t *testing.T) (holder, other driver.Mutex), run func(*testing.T, *dlock.Client, *dlock.Client, bool) (int, error), broken bool) {
	hs, os := stores(t)
	if broken {
		hs = hundredthTTL{hs}
	}
	c, other := NewClient(t, hs), NewClient(t, os)
	n, err := run(t, c, other, broken)
	switch {
	case !broken && err != nil:
		t.Fatalf("the holding that must have stayed valid: %v", err)
	case !broken && n != 0:
		t.Fatalf("%d overlaps: another client held the key while a holding of the owner reported itself valid", n)
	case broken && n == 0:
		t.Fatal("control: no overlap seen with a store that keeps keys for a hundredth of the TTL")
	}
}

// hundredthTTL keeps keys for a hundredth of the TTL asked: the broken store of the
// negative control.
type hundredthTTL struct{ driver.Mutex }

func (s hundredthTTL) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Mutex.Extend(ctx, key, token, max(ttl/100, time.Millisecond))
	g.TTL = ttl
	return g, err
}

// controlWatch bounds how long the control's watch goes on after its
// schedule ended, waiting for its first overlap.
const controlWatch = 10 * time.Second

// watch polls other's TryLock on key every 10 ms until stop is closed and
// returns the overlaps: acquisitions while a lease of held reported itself
// valid when the try started (a released lease no longer does). For the
// control, it goes on after stop until the first overlap or controlWatch
// since it started: at load 8-19 the poller saw none within a schedule's
// 600 ms, which made the control fail for want of a try, not of an
// overlap (the schedules release their watched holdings only after).
func watch(t *testing.T, other *dlock.Client, key string, held func() []*dlock.Lease, stop <-chan struct{}, control bool) <-chan int {
	out := make(chan int, 1)
	go func() {
		n, deadline, stopped := 0, time.Now().Add(controlWatch), false
		defer func() { out <- n }()
		for {
			if stopped && (n > 0 || time.Now().After(deadline)) {
				return
			}
			select {
			case <-stop:
				if !control {
					return
				}
				stopped, stop = true, nil
				continue
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			l, err := other.TryLock(context.Background(), key, dlock.WithTTL(time.Second))
			if err != nil {
				continue
			}
			for _, h := range held() {
				// Valid, or lost (not released) with validity left at the try.
				if err := h.Err(); err == nil || errors.Is(err, dlock.ErrLost) && start.Before(h.ValidUntil()) {
					if n++; n > 1 {
						continue
					}
					t.Logf("overlap: another client acquired %q while a holding reports %v of validity left", key, h.ValidUntil().Sub(start))
				}
			}
			_ = l.Release(context.Background())
		}
	}()
	return out
}

// scheduleA: Lock(WithTTL(20s)), re-enter, inner.Extend(150ms), inner
// released; 600 ms later the outer holding still reports itself valid.
func scheduleA(t *testing.T, c, other *dlock.Client, control bool) (int, error) {
	ctx := dlock.ContextWithOwner(testkit.Ctx(t), dlock.NewOwner())
	outer := MustLock(t, c, ctx, "a", dlock.WithTTL(20*time.Second))
	inner := MustLock(t, c, ctx, "a", dlock.WithTTL(20*time.Second))
	stop := make(chan struct{})
	overlaps := watch(t, other, "a", func() []*dlock.Lease { return []*dlock.Lease{outer} }, stop, control)
	if err := inner.Extend(ctx, 150*time.Millisecond); err != nil {
		t.Fatalf("inner Extend: %v", err)
	}
	Release(t, inner)
	<-time.After(600 * time.Millisecond) // the inner lease's 150 ms are long over
	close(stop)
	n := <-overlaps
	err := outer.Err()
	_ = outer.Release(context.Background())
	return n, err
}

// scheduleB: Do (default lease) runs a nested Do with WithAutoRenew(300ms)
// for 500 ms, then works 700 ms more.
func scheduleB(t *testing.T, c, other *dlock.Client, control bool) (int, error) {
	stop := make(chan struct{})
	var overlaps <-chan int
	err := c.Do(testkit.Ctx(t), "b", func(ctx context.Context) error {
		outer, _ := dlock.LeaseFromContext(ctx)
		overlaps = watch(t, other, "b", func() []*dlock.Lease { return []*dlock.Lease{outer} }, stop, control)
		err := c.Do(ctx, "b", func(ctx context.Context) error {
			<-time.After(500 * time.Millisecond)
			return nil
		}, dlock.WithAutoRenew(300*time.Millisecond))
		if err != nil {
			return err
		}
		select {
		case <-time.After(700 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(stop)
	return <-overlaps, err
}

// scheduleC: Lock(WithAutoRenew(600ms)), re-enter WithTTL(10s); the outer
// renews once and is released; 1 s later the inner holding still reports
// itself valid.
func scheduleC(t *testing.T, c, other *dlock.Client, control bool) (int, error) {
	ctx := dlock.ContextWithOwner(testkit.Ctx(t), dlock.NewOwner())
	outer := MustLock(t, c, ctx, "c", dlock.WithAutoRenew(600*time.Millisecond))
	inner := MustLock(t, c, ctx, "c", dlock.WithTTL(10*time.Second))
	stop := make(chan struct{})
	overlaps := watch(t, other, "c", func() []*dlock.Lease { return []*dlock.Lease{inner} }, stop, control)
	<-time.After(300 * time.Millisecond)    // one renewal (every 200 ms)
	_ = outer.Release(context.Background()) // lost already with the control's broken store
	<-time.After(time.Second)
	close(stop)
	n := <-overlaps
	err := inner.Err()
	_ = inner.Release(context.Background())
	return n, err
}
