package dlock

import "time"

// Clock is the source of time for validity, expiry and waiting. The system
// clock is the default; tests may substitute one that they advance by hand.
// Implementations must be safe for concurrent use, and their Now must be
// monotonic (never step backwards).
type Clock interface {
	// Now returns the current time, with a monotonic reading.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started, reporting whether it did.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// sleep waits for d on clk, or until ctx or wake fires. It reports whether d
// elapsed or wake fired (true) rather than the context ending (false).
func sleep(ctx interface{ Done() <-chan struct{} }, clk Clock, d time.Duration, wake <-chan struct{}) bool {
	elapsed := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(elapsed) })
	defer t.Stop()
	select {
	case <-elapsed:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}
