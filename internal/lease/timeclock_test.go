package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock/driver"
)

// The engine on the time package's clock, as package dlock runs it by
// default, in a synctest bubble: the bubble's clock moves only when every
// goroutine is blocked, so the timers the engine arms (time.AfterFunc) fire
// exactly when due, and a test checks the instant, not a window. The other
// tests of the package drive a fakeclock.Clock by hand.

// timeClock is the time package's clock.
type timeClock struct{}

func (timeClock) Now() time.Time                                  { return time.Now() }
func (timeClock) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

// timeHolder records the engine's calls; the expiry timer calls Expire in
// its own goroutine.
type timeHolder struct {
	v           *Validity[*time.Timer]
	ended, lost atomic.Int64
}

func (h *timeHolder) Expire()                     { h.v.Expire(h) }
func (h *timeHolder) LostError(cause error) error { return fmt.Errorf("lost: %w", cause) }
func (h *timeHolder) Ended()                      { h.ended.Add(1) }
func (h *timeHolder) Lost()                       { h.lost.Add(1) }

// closed reports whether ch is closed, once the bubble's goroutines are
// blocked.
func closed(ch <-chan struct{}) bool {
	synctest.Wait()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Done closes exactly the margin before the end of the validity: not a
// nanosecond before (the control: a timer armed early, or a check that
// could not tell), and at that instant, with the loss matching ErrExpired.
func TestValidityExpiresAtTheMarginOnTheTimeClock(t *testing.T) {
	for _, ttl := range []time.Duration{30 * time.Millisecond, time.Second, time.Minute} {
		t.Run(ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := new(Validity[*time.Timer])
				h := &timeHolder{v: v}
				v.Init(timeClock{}, ValidUntil(time.Now(), ttl, ttl), ttl, h)
				due := v.ValidUntil().Add(-Margin(ttl))
				time.Sleep(time.Until(due) - time.Nanosecond)
				if closed(v.Done()) || v.Err(h) != nil {
					t.Fatalf("lost a nanosecond before the margin (Err %v)", v.Err(h))
				}
				time.Sleep(time.Nanosecond)
				if !closed(v.Done()) {
					t.Fatal("Done not closed at the margin")
				}
				if err := v.Err(h); !errors.Is(err, driver.ErrExpired) || h.ended.Load() != 1 || h.lost.Load() != 1 {
					t.Fatalf("Err %v, ended %d, lost %d; want ErrExpired, 1 and 1", err, h.ended.Load(), h.lost.Load())
				}
			})
		})
	}
}

// lockedBatches is batches safe for the renewer's timer goroutine.
type lockedBatches struct {
	mu sync.Mutex
	b  batches
}

func (l *lockedBatches) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.ExtendMany(ctx, reqs)
}

func (l *lockedBatches) take() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.take()
}

// The renewer renews a lease every Period, exactly: nothing a nanosecond
// before (the control), one renewal at each period, none after Remove.
func TestRenewerRenewsEveryPeriodOnTheTimeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		b := &lockedBatches{b: batches{failing: map[string]bool{}}}
		r := NewRenewer[*time.Timer](timeClock{}, b)
		l := &fakeLease{name: "a", slot: NewSlot(), ttl: ttl}
		r.Add(l, ttl)
		for i := range 3 {
			time.Sleep(Period(ttl) - time.Nanosecond)
			synctest.Wait()
			if c := b.take(); len(c) != 0 {
				t.Fatalf("period %d: renewed a nanosecond early: %v", i, c)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if c := b.take(); len(c) != 1 || len(c[0]) != 1 || c[0][0] != "a" {
				t.Fatalf("period %d: renewals %v, want one of a", i, c)
			}
		}
		r.Remove(l)
		time.Sleep(2 * Period(ttl))
		synctest.Wait()
		if c := b.take(); len(c) != 0 {
			t.Fatalf("renewed after Remove: %v", c)
		}
	})
}
