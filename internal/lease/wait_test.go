package lease

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock/internal/fakeclock"
)

// fakeNotifier hands out one channel per key and counts subscriptions.
type fakeNotifier struct {
	ch   chan struct{}
	subs int
}

func (n *fakeNotifier) Subscribe(context.Context, string) (<-chan struct{}, func(), error) {
	n.subs++
	return n.ch, func() {}, nil
}

// The Pacer tests run in a synctest bubble: synctest.Wait returns once the
// pausing goroutine is blocked, on its timer or on what wakes it, so the
// test knows without polling that a sleep armed its timer, and that a
// pause did (or did not) end.

// awaitTimer waits until the bubble's goroutines are blocked and fails the
// test unless a sleep armed its timer.
func awaitTimer(t *testing.T, c *fakeClock) {
	t.Helper()
	synctest.Wait()
	if c.Pending() == 0 {
		t.Fatal("no timer armed")
	}
}

// ended returns the pause's result once the bubble's goroutines are
// blocked, failing the test if the pause has not ended by then.
func ended(t *testing.T, done <-chan bool, what string) bool {
	t.Helper()
	synctest.Wait()
	select {
	case ok := <-done:
		return ok
	default:
		t.Fatalf("%s: the pause did not end", what)
		return false
	}
}

// On the first contention the Pacer subscribes and returns at once; then a
// release notification wakes it although the backoff is an hour.
func TestPacerSubscribesThenWakesOnNotify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := fakeclock.New(time.Unix(1000, 0))
		n := &fakeNotifier{ch: make(chan struct{}, 1)}
		p := NewPacer[*fakeTimer](clk, func(int) time.Duration { return time.Hour }, n, nil)
		defer p.Stop()
		ctx := context.Background()
		if !p.Pause(ctx, "k", true, -1, 0) || n.subs != 1 || clk.Pending() != 0 {
			t.Fatalf("first contention: subs %d, timers %d; want a subscription and no sleep", n.subs, clk.Pending())
		}
		done := make(chan bool, 1)
		go func() { done <- p.Pause(ctx, "k", true, -1, 0) }()
		awaitTimer(t, clk)
		n.ch <- struct{}{}
		if ok := ended(t, done, "notified"); !ok || n.subs != 1 || p.Failures() != 2 {
			t.Fatalf("woken: %v, subs %d, failures %d", ok, n.subs, p.Failures())
		}
	})
}

// Without a notifier the pause ends at the holder's expiry (plus at most
// 1 ms + 2% jitter) when that comes before the backoff; a cancelled context
// ends it with false.
func TestPacerSleepsUntilTheHoldersExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := fakeclock.New(time.Unix(1000, 0))
		p := NewPacer[*fakeTimer](clk, func(int) time.Duration { return time.Hour }, nil, nil)
		done := make(chan bool, 1)
		go func() { done <- p.Pause(context.Background(), "k", true, 10*time.Millisecond, 0) }()
		awaitTimer(t, clk)
		clk.Advance(10*time.Millisecond - time.Microsecond)
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("the pause ended before the holder's expiry")
		}
		clk.Advance(1*time.Millisecond + 200*time.Microsecond + time.Microsecond)
		if ok := ended(t, done, "at the holder's expiry"); !ok {
			t.Fatal("pause reported the context ended")
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- p.Pause(ctx, "k", false, -1, 0) }()
		awaitTimer(t, clk)
		cancel()
		if ok := ended(t, done, "cancelled"); ok {
			t.Fatal("cancelled pause reported true")
		}
	})
}

// A store's retry hint (driver.ContendedError.Retry) sets the pause: it ends
// within the hint, at most a tenth early, although the backoff and the
// holder's lease are an hour; a hint of 0 leaves the pacing as it was (the
// holder's expiry here).
func TestPacerFollowsTheRetryHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retry = 20 * time.Millisecond
		clk := fakeclock.New(time.Unix(1000, 0))
		p := NewPacer[*fakeTimer](clk, func(int) time.Duration { return time.Hour }, nil, nil)
		for i := 0; i < 20; i++ {
			done := make(chan bool, 1)
			go func() { done <- p.Pause(context.Background(), "k", true, time.Hour, retry) }()
			awaitTimer(t, clk)
			clk.Advance(retry - retry/10 - time.Microsecond)
			if clk.Pending() != 1 {
				t.Fatalf("round %d: the pause ended more than a tenth before the hint", i)
			}
			synctest.Wait()
			if len(done) != 0 {
				t.Fatalf("round %d: the pause ended more than a tenth before the hint", i)
			}
			clk.Advance(retry/10 + time.Microsecond)
			if ok := ended(t, done, fmt.Sprintf("round %d, at the hint", i)); !ok {
				t.Fatal("pause reported the context ended")
			}
		}
		for i := 0; i < 1000; i++ {
			if d := p.delay(true, time.Hour, retry); d > retry || d <= retry-retry/10 {
				t.Fatalf("delay with hint %v: %v", retry, d)
			}
			if d := p.delay(true, 10*time.Millisecond, 0); d < 10*time.Millisecond || d > 11*time.Millisecond+200*time.Microsecond {
				t.Fatalf("delay without a hint: %v, want the holder's expiry", d)
			}
			if d := p.delay(false, -1, retry); d != time.Hour {
				t.Fatalf("delay after a non-contended failure with a hint: %v, want the backoff", d)
			}
		}
	})
}
