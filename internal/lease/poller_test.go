package lease

import (
	"testing"
	"time"

	"example.com/dlock/internal/fakeclock"
)

// fakePoller is a place in a polling line: first says whether it polls.
type fakePoller struct {
	fakeNotifier
	first bool
}

func (p *fakePoller) Polls() bool { return p.first }

// TestPollerFirstPollsOthersSleep: in a polling line (Poller), once
// subscribed, the first waiter pauses for its backoff (or the store's
// retry hint), as a waiter without a notifier does; the others sleep until
// the holder's expiry, hint or not, as a notified waiter does. Control: a
// plain notifier's subscriber sleeps until the expiry, and follows the
// hint, as before.
func TestPollerFirstPollsOthersSleep(t *testing.T) {
	const backoff, remaining, retry = 5 * time.Millisecond, time.Minute, 20 * time.Millisecond
	clk := fakeclock.New(time.Unix(1000, 0))
	pacer := func(n *fakePoller, plain bool) *Pacer[*fakeTimer] {
		var p Pacer[*fakeTimer]
		if plain {
			p = NewPacer[*fakeTimer](clk, func(int) time.Duration { return backoff }, &n.fakeNotifier, nil)
		} else {
			p = NewPacer[*fakeTimer](clk, func(int) time.Duration { return backoff }, n, nil)
		}
		p.wake = n.ch // subscribed
		return &p
	}
	for _, tc := range []struct {
		name         string
		first, plain bool
		hinted       bool          // follows the retry hint
		want         time.Duration // without a hint (the expiry: at least)
	}{
		{"first of the line", true, false, true, backoff},
		{"behind the first", false, false, false, remaining},
		{"a notifier's subscriber (control)", false, true, true, remaining},
	} {
		p := pacer(&fakePoller{fakeNotifier: fakeNotifier{ch: make(chan struct{})}, first: tc.first}, tc.plain)
		if d := p.delay(true, remaining, 0); d < tc.want || d > tc.want+2*time.Second {
			t.Errorf("%s: pause %v without a hint, want %v (the expiry plus jitter)", tc.name, d, tc.want)
		}
		d := p.delay(true, remaining, retry)
		if hinted := d <= retry; hinted != tc.hinted {
			t.Errorf("%s: pause %v with a %v hint; want the hint followed: %v", tc.name, d, retry, tc.hinted)
		}
	}
}
