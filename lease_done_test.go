package dlock_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A8: Done is closed no later than ValidUntil. The expiry timer leads
// ValidUntil by a margin (5 ms, or a tenth of the TTL), so a timer that
// runs a little late (seen 0.4-1.4 ms under -race) still closes Done in
// time. A process descheduled for longer than the margin closes it late, so
// two late leases in ten are tolerated; without the margin every one is late.
func TestA8DoneClosedByValidUntil(t *testing.T) {
	f := startRedis(t, true)
	c := f.client(t, false, nil)
	ctx := testCtx(t)
	const n, ttl = 10, 60 * time.Millisecond
	late := 0
	for i := range n {
		l := mustLock(t, c, ctx, "a8", dlock.WithTTL(ttl))
		vu := l.ValidUntil()
		within(t, l.Done(), ttl+time.Second, "lost signal")
		if d := time.Since(vu); d > 0 {
			late++
			t.Logf("lease %d: Done closed %v after ValidUntil", i, d)
		}
		if err := l.Err(); err == nil {
			t.Fatalf("lease %d: Done closed while Err is nil", i)
		}
		_ = l.Release(ctx) // ErrLost, and frees the key for the next round
	}
	if late > n/4 {
		t.Fatalf("Done closed after ValidUntil for %d of %d leases", late, n)
	}
}

// A8: once ValidUntil has passed, Err reports the loss (and Done is
// closed on that call) even if the expiry timer has not run: this clock's
// timers never fire.
func TestA8ErrReportsLossFromValidUntil(t *testing.T) {
	clk := newFakeClock()
	c, err := dlock.New(memstore.New(clk.Now), dlock.WithClock(timerlessClock{clk}))
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(time.Second))
	clk.Advance(l.ValidUntil().Sub(clk.Now()) - time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("Err = %v 1ms before ValidUntil", err)
	}
	clk.Advance(time.Millisecond)
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("Err = %v at ValidUntil, want ErrLost (ErrExpired)", err)
	}
	within(t, l.Done(), time.Second, "Done after Err reported the loss")
	if err := l.Release(testCtx(t)); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Release = %v, want ErrLost", err)
	}
}

// timerlessClock is a fakeClock whose timers never fire.
type timerlessClock struct{ *fakeClock }

func (timerlessClock) AfterFunc(time.Duration, func()) dlock.Timer { return neverTimer{} }

type neverTimer struct{}

func (neverTimer) Stop() bool { return true }
