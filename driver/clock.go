package driver

import "time"

// Clock is the source of time for validity, expiry and waiting, shared by
// the client (dlock.WithClock) and the stores that measure time themselves
// (Redlock). The system clock is the default; tests may substitute one that
// they advance by hand. Implementations must be safe for concurrent use,
// and their Now must be monotonic (never step backwards).
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
