package dlock_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/fakeclock"
	"example.com/dlock/memstore"
)

// fakeClock is advanced by hand (fakeclock.Clock), with AfterFunc returning
// a dlock.Timer.
type fakeClock struct{ *fakeclock.Clock }

func newFakeClock() *fakeClock { return &fakeClock{fakeclock.New(time.Unix(1_000_000, 0))} }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) dlock.Timer {
	return c.Clock.AfterFunc(d, f)
}

// The validity of a grant is the Redlock formula on the local clock:
// start + TTL - (TTL/100 + 2ms), checked exactly with a fake clock.
func TestValidityIsTTLMinusElapsedMinusDrift(t *testing.T) {
	clk := newFakeClock()
	store := memstore.New(clk.Now)
	c, err := dlock.New(store, dlock.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	const ttl = 10 * time.Second
	start := clk.Now()
	l := mustLock(t, c, testCtx(t), "k", dlock.WithTTL(ttl))
	want := start.Add(ttl - ttl/100 - 2*time.Millisecond)
	if got := l.ValidUntil(); !got.Equal(want) {
		t.Fatalf("ValidUntil = %v, want %v", got.Sub(start), want.Sub(start))
	}
	// The expiry timer leads ValidUntil by a margin (5 ms for this TTL), so
	// that a timer running a little late still closes Done in time.
	const margin = 5 * time.Millisecond
	clk.Advance(want.Sub(start) - margin - time.Millisecond)
	if l.Err() != nil || l.Remaining() != margin+time.Millisecond {
		t.Fatalf("1ms before the expiry margin: err %v, remaining %v", l.Err(), l.Remaining())
	}
	clk.Advance(time.Millisecond)
	within(t, l.Done(), time.Second, "expiry on the fake clock, the margin before ValidUntil")
	// The store still has the key for another 102ms of its own time: the
	// client gives up first, which is the safe side.
	if _, err := c.TryLock(testCtx(t), "k"); err == nil {
		t.Fatal("store released the key before its TTL")
	}
}

func TestExponentialBackoffIsJitteredAndBounded(t *testing.T) {
	b := dlock.ExponentialBackoff(2*time.Millisecond, 100*time.Millisecond)
	for n := 1; n < 40; n++ {
		ceiling := min(2*time.Millisecond<<(n-1), 100*time.Millisecond)
		seen := map[time.Duration]bool{}
		for i := 0; i < 50; i++ {
			d := b(n)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("attempt %d: %v outside [%v, %v]", n, d, ceiling/2, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: only %d distinct delays in 50: waiters would wake in lock-step", n, len(seen))
		}
	}
}

func TestFenceGateRejectsStaleTokens(t *testing.T) {
	var g dlock.FenceGate
	ran := 0
	inc := func() error { ran++; return nil }
	for _, f := range []uint64{3, 3, 5} {
		if err := g.Admit("stock", f, inc); err != nil {
			t.Fatalf("fence %d: %v", f, err)
		}
	}
	if err := g.Admit("stock", 4, inc); err == nil || ran != 3 {
		t.Fatalf("stale fence 4 admitted (err %v, ran %d)", err, ran)
	}
	if err := g.Admit("other", 1, inc); err != nil {
		t.Fatalf("fences are per resource: %v", err)
	}
}

// TestExponentialBackoffEdges pins the documented edge cases: a min that is
// not positive, or above max, starts at max; a max that is not positive
// means no pause.
func TestExponentialBackoffEdges(t *testing.T) {
	for _, c := range []struct {
		min, max, lo, hi time.Duration
	}{
		{0, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
		{-time.Second, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
		{time.Second, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
		{time.Millisecond, 0, 0, 0},
		{time.Millisecond, -time.Second, 0, 0},
	} {
		b := dlock.ExponentialBackoff(c.min, c.max)
		for n := 1; n < 20; n++ {
			if d := b(n); d < c.lo || d > c.hi {
				t.Errorf("ExponentialBackoff(%v, %v)(%d) = %v, want within [%v, %v]", c.min, c.max, n, d, c.lo, c.hi)
			}
		}
	}
}
