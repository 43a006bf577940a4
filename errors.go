package dlock

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error returned by this package and by the stores in
// this module matches one or more of them with errors.Is; the text around them
// carries the detail.
var (
	// ErrNotAcquired means the lock was not acquired: another owner holds it
	// and the call gave up (a single try, the wait bound elapsed, or the
	// context ended). Nothing was changed in the store.
	ErrNotAcquired = errors.New("dlock: lock not acquired")

	// ErrNotHeld means the caller does not hold the lock it tried to extend or
	// release: it was released already, it expired, or another owner has it.
	ErrNotHeld = errors.New("dlock: lock not held")

	// ErrLost means a lease ended before its holder released it. Errors that
	// match ErrLost also match their cause: ErrExpired, ErrTaken or
	// ErrUnavailable.
	ErrLost = errors.New("dlock: lock lost")

	// ErrExpired is a cause of ErrLost and ErrNotHeld: the lease's validity ran
	// out, or the store no longer has the key.
	ErrExpired = errors.New("dlock: lease expired")

	// ErrTaken is a cause of ErrLost and ErrNotHeld: another owner holds the key.
	ErrTaken = errors.New("dlock: lock taken by another owner")

	// ErrInvalid means an argument or option was rejected before any I/O.
	ErrInvalid = errors.New("dlock: invalid argument")

	// ErrUnavailable means the store could not be reached or failed to answer.
	ErrUnavailable = errors.New("dlock: store unavailable")

	// ErrRefused means the store refused the call in a way that retrying
	// cannot fix: missing permissions, failed authentication, an unknown
	// command, or a value at the lock's key that is not a lock. Lock and Do
	// stop waiting at once on such an error (it also matches ErrNotAcquired
	// there); renewal keeps trying until the lease's validity runs out.
	ErrRefused = errors.New("dlock: refused by the store")

	// ErrStaleFence is returned by FenceGate when a write carries a fencing
	// token lower than one already admitted.
	ErrStaleFence = errors.New("dlock: stale fencing token")
)

// ContendedError is what Store.Acquire returns when another owner holds the
// key. It matches ErrNotAcquired. Remaining is the holder's remaining time to
// live as the store saw it, or a negative value if the store does not know.
type ContendedError struct {
	Remaining time.Duration
}

func (e *ContendedError) Error() string {
	if e.Remaining < 0 {
		return ErrNotAcquired.Error() + ": held by another owner"
	}
	return fmt.Sprintf("%s: held by another owner for %v", ErrNotAcquired, e.Remaining)
}

// Is reports whether target is ErrNotAcquired.
func (e *ContendedError) Is(target error) bool { return target == ErrNotAcquired }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// lostError builds the error a lease reports once it is lost.
func lostError(key string, cause error) error {
	return fmt.Errorf("%w: lock %q: %w", ErrLost, key, cause)
}

// classify wraps an unexpected store error as ErrUnavailable, leaving the
// contract's own sentinels and context errors untouched.
func classify(err error) error {
	switch {
	case err == nil,
		errors.Is(err, ErrNotAcquired), errors.Is(err, ErrNotHeld),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrUnavailable),
		errors.Is(err, ErrRefused):
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
