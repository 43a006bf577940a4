package dlock_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// Done is closed no later than ValidUntil: the expiry timer leads
// ValidUntil by a margin (5 ms, or a tenth of the TTL if less), so that a
// timer that runs a little late still closes Done in time. In a synctest
// bubble timers run exactly when due: Done closes exactly the margin before
// ValidUntil, for every lease, with no tolerance for late ones (the real
// clock version tolerated two late leases in ten). Control: Done is not
// closed a moment before that, so the test would see a timer armed at
// ValidUntil (no margin) or one that fires early.
//
// Was TestA8DoneClosedByValidUntil (review item A8), on a real Redis.
func TestDoneClosedByValidUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t)
		ctx := testCtx(t)
		for _, ttl := range []time.Duration{60 * time.Millisecond, 30 * time.Millisecond, time.Second} {
			margin := min(5*time.Millisecond, ttl/10)
			for i := range 10 {
				l := mustLock(t, c, ctx, "a8", dlock.WithTTL(ttl))
				vu := l.ValidUntil()
				time.Sleep(time.Until(vu.Add(-margin)) - time.Nanosecond) // the bubble's clock
				synctest.Wait()
				select {
				case <-l.Done():
					t.Fatalf("ttl %v, lease %d: Done closed %v before ValidUntil, earlier than the %v margin", ttl, i, time.Until(vu), margin)
				default:
				}
				<-l.Done()
				if d := time.Until(vu); d != margin {
					t.Fatalf("ttl %v, lease %d: Done closed %v before ValidUntil, want exactly the %v margin", ttl, i, d, margin)
				}
				if err := l.Err(); err == nil {
					t.Fatalf("lease %d: Done closed while Err is nil", i)
				}
				_ = l.Release(ctx) // ErrLost, and frees the key for the next round
			}
		}
	})
}

// Once ValidUntil has passed, Err reports the loss (and Done is
// closed on that call) even if the expiry timer has not run: this clock's
// timers never fire. (Was TestA8ErrReportsLossFromValidUntil, review item A8.)
func TestErrReportsLossFromValidUntil(t *testing.T) {
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
