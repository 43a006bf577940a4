package driver

import (
	"errors"
	"fmt"
	"time"
)

// The errors stores return, shared with package dlock, which exports the same
// values under the same names (dlock.ErrNotHeld == driver.ErrNotHeld), so
// that errors.Is works across the seam.
var (
	// ErrNotAcquired means the lock was not acquired.
	ErrNotAcquired = errors.New("dlock: lock not acquired")
	// ErrNotHeld means the token does not hold the key it tried to extend,
	// release or transfer; nothing was changed.
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrExpired is a cause of ErrNotHeld: no holder, or the key is gone.
	ErrExpired = errors.New("dlock: lease expired")
	// ErrTaken is a cause of ErrNotHeld: another owner holds the key.
	ErrTaken = errors.New("dlock: lock taken by another owner")
	// ErrInvalid means an argument was rejected; nothing was changed.
	ErrInvalid = errors.New("dlock: invalid argument")
	// ErrUnavailable means the store could not be reached or failed to
	// answer. Stores need not use it: any error that matches no sentinel is
	// treated as ErrUnavailable.
	ErrUnavailable = errors.New("dlock: store unavailable")
	// ErrRefused means the store refused the call in a way that retrying
	// cannot fix.
	ErrRefused = errors.New("dlock: refused by the store")
	// ErrStaleFence means a write carried a fencing token lower than one
	// already admitted (dlock.FenceGate, redisstore.SetFenced); nothing was
	// written.
	ErrStaleFence = errors.New("dlock: stale fencing token")
)

// ContendedError is what Mutex.Acquire returns when another owner holds the
// key. It matches ErrNotAcquired. Remaining is the holder's remaining time to
// live as the store saw it, or a negative value if the store does not know.
// A store that keeps a free key reserved for a waiter other than the caller
// reports it as contended too, with the reservation's remaining time.
type ContendedError struct {
	// Remaining is the holder's remaining time to live, or negative if
	// the store does not know it.
	Remaining time.Duration
	// Retry is a pacing hint. > 0: the store has placed this waiter next in
	// line and expects its next attempt within Retry (a store that keeps
	// the key reserved for it after a release drops that reservation when
	// the attempt comes late); the Client then pauses for Retry, minus a
	// little jitter, never more, instead of its backoff and the holder's
	// Remaining. 0: no hint: the Client backs off as it always has. Stores
	// with no notion of a line leave it 0, and nothing changes for them.
	Retry time.Duration
}

// Error says the key is held by another owner and, when known, when that
// holder's lease ends.
func (e *ContendedError) Error() string {
	if e.Remaining < 0 {
		return ErrNotAcquired.Error() + ": held by another owner"
	}
	// Remaining is the holder's TTL, not how long it has held the key.
	return fmt.Sprintf("%s: held by another owner; its lease ends in %v", ErrNotAcquired, e.Remaining.Round(time.Millisecond))
}

// Is reports whether target is ErrNotAcquired.
func (e *ContendedError) Is(target error) bool { return target == ErrNotAcquired }

// NotHeld returns the error Extend, Release and Transfer return for a token
// that does not hold the key: it matches ErrNotHeld and ErrExpired (taken is
// false: nobody holds the key) or ErrTaken (another owner does).
func NotHeld(taken bool) error {
	if taken {
		return fmt.Errorf("%w: %w", ErrNotHeld, ErrTaken)
	}
	return fmt.Errorf("%w: %w", ErrNotHeld, ErrExpired)
}

// Unsupported returns an error matching errors.ErrUnsupported that names what
// the store cannot serve right now and why.
func Unsupported(what, why string) error {
	return fmt.Errorf("%w: %s: %s", errors.ErrUnsupported, what, why)
}
