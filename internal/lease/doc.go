// Package lease is the generic lease engine behind package dlock's
// primitives: how long a lease is valid and the signal of its end (expiry
// timer and margin, serialised renewals, loss hooks), the renewal loop
// (scheduling and batching), and the pacing of a wait (release
// notifications, backoff, the holder's expiry). It knows nothing of keys'
// meaning or of any store: a primitive (the mutex today; a semaphore or a
// read-write lock later) provides the calls that extend one lease or many
// (Extender), and builds the errors its users see.
package lease

import "time"

// Stopper is a pending timer call.
type Stopper interface {
	// Stop prevents the call if it has not started, reporting whether it did.
	Stop() bool
}

// Clock is the source of time, generic in its timer type so that a client
// package's own Clock interface satisfies it as it is.
type Clock[T Stopper] interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) T
}

// Period is the renewal period of a lease of length ttl: a third of it, as
// Redisson's watchdog renews.
func Period(ttl time.Duration) time.Duration { return ttl / 3 }

// Drift is the margin subtracted from every lease for clock-rate differences
// between client and server: 1% of the TTL plus 2 ms, as in Redlock.
func Drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// ValidUntil is the end of the validity of a grant of grantTTL for a
// requested ttl, asked for at start: the Redlock formula.
func ValidUntil(start time.Time, grantTTL, ttl time.Duration) time.Time {
	return start.Add(grantTTL - Drift(ttl))
}
