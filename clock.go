package dlock

import (
	"time"

	"example.com/dlock/driver"
)

// Clock is the source of time for validity, expiry and waiting. The system
// clock is the default; tests may substitute one that they advance by hand.
// Implementations must be safe for concurrent use, and their Now must be
// monotonic (never step backwards). It is the same type as driver.Clock.
type Clock = driver.Clock

// Timer is a pending AfterFunc call. It is the same type as driver.Timer.
type Timer = driver.Timer

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
