package lease

import (
	"context"
	"testing"
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

// awaitTimer polls until a sleep armed its timer, within 5 s.
func awaitTimer(t *testing.T, c *fakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no timer armed")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// On the first contention the Pacer subscribes and returns at once; then a
// release notification wakes it although the backoff is an hour.
func TestPacerSubscribesThenWakesOnNotify(t *testing.T) {
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
	select {
	case ok := <-done:
		if !ok || n.subs != 1 || p.Failures() != 2 {
			t.Fatalf("woken: %v, subs %d, failures %d", ok, n.subs, p.Failures())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notification did not wake the pause")
	}
}

// Without a notifier the pause ends at the holder's expiry (plus at most
// 1 ms + 2% jitter) when that comes before the backoff; a cancelled context
// ends it with false.
func TestPacerSleepsUntilTheHoldersExpiry(t *testing.T) {
	clk := fakeclock.New(time.Unix(1000, 0))
	p := NewPacer[*fakeTimer](clk, func(int) time.Duration { return time.Hour }, nil, nil)
	done := make(chan bool, 1)
	go func() { done <- p.Pause(context.Background(), "k", true, 10*time.Millisecond, 0) }()
	awaitTimer(t, clk)
	clk.Advance(11*time.Millisecond + 200*time.Microsecond)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("pause reported the context ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pause did not end at the holder's expiry")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- p.Pause(ctx, "k", false, -1, 0) }()
	awaitTimer(t, clk)
	cancel()
	if ok := <-done; ok {
		t.Fatal("cancelled pause reported true")
	}
}

// A store's retry hint (driver.ContendedError.Retry) sets the pause: it ends
// within the hint, at most a tenth early, although the backoff and the
// holder's lease are an hour; a hint of 0 leaves the pacing as it was (the
// holder's expiry here).
func TestPacerFollowsTheRetryHint(t *testing.T) {
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
		clk.Advance(retry/10 + time.Microsecond)
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("pause reported the context ended")
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the pause did not end at the hint", i)
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
}
