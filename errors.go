package dlock

import (
	"errors"
	"fmt"
	"strings"

	"example.com/dlock/driver"
)

// Sentinel errors. Every error returned by this package and by the stores in
// this module matches one or more of them with errors.Is; the text around them
// carries the detail. The ones a store returns are the same values as
// package driver's (dlock.ErrNotHeld == driver.ErrNotHeld).
var (
	// ErrNotAcquired means the lock was not acquired: another owner holds it,
	// the store could not be reached or refused the call, and the call gave
	// up (a single try, the wait bound elapsed, the context ended, or the
	// error was final). Nothing was changed in the store, except that an
	// attempt whose reply was lost may have been applied: Client.Lock says
	// what is done about it.
	ErrNotAcquired = driver.ErrNotAcquired

	// ErrNotHeld means the caller does not hold the lock it tried to extend or
	// release: it was released already, it expired, or another owner has it.
	ErrNotHeld = driver.ErrNotHeld

	// ErrLost means a lease ended before its holder released it. Errors that
	// match ErrLost also match their cause: ErrExpired, ErrTaken or
	// ErrUnavailable, or ErrInvalid if Client.Close ended the lease.
	ErrLost = errors.New("dlock: lock lost")

	// ErrExpired is a cause of ErrLost and ErrNotHeld: the lease's validity ran
	// out, or the store no longer has the key (it expired or was deleted).
	ErrExpired = driver.ErrExpired

	// ErrTaken is a cause of ErrLost and ErrNotHeld: another owner holds the key.
	ErrTaken = driver.ErrTaken

	// ErrInvalid means an argument or option was rejected before any I/O, or
	// the Client was closed (Client.Close).
	ErrInvalid = driver.ErrInvalid

	// ErrUnavailable means the store could not be reached or failed to answer.
	ErrUnavailable = driver.ErrUnavailable

	// ErrRefused means the store refused the call in a way that retrying
	// cannot fix: missing permissions, failed authentication, an unknown
	// command, or a value at the lock's key that is not a lock. Lock and Do
	// stop waiting at once on such an error, which then also matches
	// ErrNotAcquired, as it does from TryLock; renewal keeps trying until the
	// lease's validity runs out.
	ErrRefused = driver.ErrRefused

	// ErrStaleFence is returned by FenceGate when a write carries a fencing
	// token lower than one already admitted.
	ErrStaleFence = driver.ErrStaleFence
)

// ContendedError is what TryLock (and a store's Acquire) returns when another
// owner holds the key. It matches ErrNotAcquired. Remaining is the holder's
// remaining time to live as the store saw it, or a negative value if the
// store does not know. It is the same type as driver.ContendedError.
type ContendedError = driver.ContendedError

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// lostError builds the error a lease reports once it is lost. A store that
// says nobody holds the key cannot tell an expiry from a deletion, so the
// text says so instead of "lease expired" (the error still matches
// ErrExpired and the store's error).
func lostError(key string, cause error) error {
	if errors.Is(cause, ErrNotHeld) && errors.Is(cause, ErrExpired) && !errors.Is(cause, ErrTaken) {
		return &textError{fmt.Sprintf("%v: lock %q: key gone (deleted or expired)", ErrLost, key), []error{ErrLost, cause}}
	}
	return tidy(fmt.Errorf("%w: lock %q: %w", ErrLost, key, cause))
}

// textError is an error with its own text over the errors it matches.
type textError struct {
	msg  string
	errs []error
}

func (e *textError) Error() string   { return e.msg }
func (e *textError) Unwrap() []error { return e.errs }

// tidyError gives err a text with a single "dlock: " prefix and no line
// breaks: wrapping one sentinel's text in another's would otherwise repeat
// the prefix. errors.Is and errors.As see err unchanged. The text is made
// when asked for, so that errors nobody prints cost nothing more.
type tidyError struct{ err error }

func tidy(err error) error { return &tidyError{err} }

func (e *tidyError) Error() string {
	s := strings.ReplaceAll(e.err.Error(), "\ndlock: ", "; ")
	s = strings.ReplaceAll(s, ": dlock: ", ": ")
	return strings.ReplaceAll(s, "\n", "; ")
}

// joinLine is errors.Join with a one-line text: the errors' texts
// separated by "; ". It returns nil if every err is nil.
func joinLine(errs ...error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	return tidy(err)
}

// trimSentinels is an inner error's text as part of a longer message: without
// its "dlock: " prefix or a "lock not acquired: " the message already says.
func trimSentinels(s string) string {
	s = strings.TrimPrefix(s, ErrNotAcquired.Error()+": ")
	s = strings.TrimPrefix(s, "dlock: ")
	s = strings.ReplaceAll(s, ": dlock: ", ": ")
	return strings.ReplaceAll(s, "\n", "; ")
}

func (e *tidyError) Unwrap() error { return e.err }

// classify wraps an unexpected store error as ErrUnavailable, leaving the
// contract's own sentinels untouched. A context error is wrapped too (a
// call cut short has an unknown outcome); errors.Is still finds it.
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
