package driver

import (
	"context"
	"fmt"
	"time"
)

// RateLimiter is the rate-limiting primitive: GCRA (the generic cell rate
// algorithm) on the store's clock, with one value of state per key (its
// theoretical arrival time, TAT). It is a Store; its Model does not apply
// to it (a limiter has no lease).
//
// For a limit of Rate per Period with Burst, the emission interval is
// I = Period/Rate (rounded up to the store's clock unit, so never faster
// than asked). A call for n at store time now with TAT t (now if the key has
// no state or t < now) is admitted when t + n·I − Burst·I <= now, and then
// sets the key's TAT to t + n·I. So a fresh key admits Burst at once, and
// then one every I; over any window of length W a key admits at most
// Burst + W/I to callers of one limit, whoever they are and whatever their
// clocks.
//
// Rules, besides the ones in the package documentation (checked by package
// drivertest):
//
//   - The store's clock: now is read by the store (the server's clock, or
//     the clock given to the store), never the caller's.
//   - n is admitted all at once or not at all: a denied call changes
//     nothing in the store, so that callers retrying a denied request do
//     not push each other's admission back.
//   - The limit is the caller's, not the key's: each call applies its own
//     limit to the key's TAT, which carries over when a caller changes its
//     limit.
//   - Per-key state is bounded: once a key's TAT has passed (ResetAfter
//     after the last admission) the key is as fresh, and the store keeps
//     nothing of it beyond its documented retention.
//   - Invalid arguments (ValidateRate) change nothing and return an error
//     matching ErrInvalid, before any I/O.
//
// RateLimiter keys are a namespace of their own: key "k" of a RateLimiter
// and key "k" of a Mutex or a Semaphore of the same store are different
// things.
type RateLimiter interface {
	Store

	// AllowN admits n requests of key under limit if the key's budget has
	// room for all n, on the store's clock. Admitted or denied, the answer
	// is a RateResult with a nil error; a denied call changes nothing. A
	// ctx already done makes it fail, changing nothing. An error matching
	// no sentinel means the outcome is unknown (the n may have been
	// charged).
	AllowN(ctx context.Context, key string, limit RateLimit, n int) (RateResult, error)
}

// RateLimit is a limit of Rate requests per Period, of which Burst may come
// at once.
type RateLimit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// Interval is the emission interval, Period/Rate, rounded up to the
// nanosecond. Stores with a coarser clock round it up to their unit.
func (l RateLimit) Interval() time.Duration {
	if l.Rate < 1 {
		return 0
	}
	i := l.Period / time.Duration(l.Rate)
	if i*time.Duration(l.Rate) < l.Period {
		i++
	}
	return i
}

// String is "Rate/Period burst Burst".
func (l RateLimit) String() string {
	return fmt.Sprintf("%d/%v burst %d", l.Rate, l.Period, l.Burst)
}

// RateResult is the answer to an AllowN.
type RateResult struct {
	// Allowed is n if the call was admitted, 0 if it was denied.
	Allowed int
	// Remaining is how many single requests the key would admit right
	// after the call (0 to Burst).
	Remaining int
	// RetryAfter is 0 if the call was admitted; if denied, the time until
	// the same call would be admitted, if nobody else is admitted first.
	RetryAfter time.Duration
	// ResetAfter is the time until the key's budget is full again (its TAT
	// minus now): 0 for a fresh key, at most Burst intervals.
	ResetAfter time.Duration
}

// MinRateInterval and MaxRateWindow bound a RateLimit: its interval is at
// least MinRateInterval (a million a second) and a full burst takes at most
// MaxRateWindow to come back (Burst × Interval), so that every store can
// count it exactly in microseconds.
const (
	MinRateInterval = time.Microsecond
	MaxRateWindow   = 366 * 24 * time.Hour
)

// BurstExceededError is what ValidateRate returns when n is larger than the
// limit's burst: such a call can never be admitted. It matches ErrInvalid.
type BurstExceededError struct {
	N, Burst int
}

// Error names both numbers.
func (e *BurstExceededError) Error() string {
	return fmt.Sprintf("%s: %d requests asked at once, above the burst of %d: they can never be admitted", ErrInvalid, e.N, e.Burst)
}

// Is reports whether target is ErrInvalid.
func (e *BurstExceededError) Is(target error) bool { return target == ErrInvalid }

// ValidateRateLimit reports whether limit is acceptable: Rate >= 1,
// Period > 0, Burst >= 1, Interval >= MinRateInterval and Burst × Interval
// <= MaxRateWindow. The error matches ErrInvalid.
func ValidateRateLimit(limit RateLimit) error {
	switch {
	case limit.Rate < 1:
		return fmt.Errorf("%w: rate %d: want at least 1 per period", ErrInvalid, limit.Rate)
	case limit.Period <= 0:
		return fmt.Errorf("%w: period %v: want > 0", ErrInvalid, limit.Period)
	case limit.Burst < 1:
		return fmt.Errorf("%w: burst %d: want at least 1", ErrInvalid, limit.Burst)
	case limit.Interval() < MinRateInterval:
		return fmt.Errorf("%w: %d per %v is faster than one per %v", ErrInvalid, limit.Rate, limit.Period, MinRateInterval)
	case int64(limit.Burst) > int64(MaxRateWindow/limit.Interval()):
		return fmt.Errorf("%w: a burst of %d at one per %v takes longer than %v to come back", ErrInvalid, limit.Burst, limit.Interval(), MaxRateWindow)
	}
	return nil
}

// ValidateRate reports whether the arguments of an AllowN are acceptable:
// key as ValidateKey, limit as ValidateRateLimit, and 1 <= n <= Burst (a
// larger n is a *BurstExceededError). The error matches ErrInvalid.
func ValidateRate(key string, limit RateLimit, n int) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ValidateRateLimit(limit); err != nil {
		return err
	}
	switch {
	case n < 1:
		return fmt.Errorf("%w: %d requests: want at least 1", ErrInvalid, n)
	case n > limit.Burst:
		return &BurstExceededError{N: n, Burst: limit.Burst}
	}
	return nil
}

// GCRA is the decision of RateLimiter.AllowN, for stores that keep the TAT
// themselves (as an offset on their own clock): given the key's TAT (zero
// or before now: a fresh key) it returns the result and the new TAT, which
// is tat itself when the call is denied. limit and n must be valid.
func GCRA(now, tat time.Time, limit RateLimit, n int) (RateResult, time.Time) {
	iv := limit.Interval()
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(time.Duration(n) * iv)
	allowAt := next.Add(-time.Duration(limit.Burst) * iv)
	if allowAt.After(now) {
		left := now.Sub(tat.Add(-time.Duration(limit.Burst) * iv))
		return RateResult{Remaining: int(max(left/iv, 0)), RetryAfter: allowAt.Sub(now), ResetAfter: tat.Sub(now)}, tat
	}
	return RateResult{Allowed: n, Remaining: int(now.Sub(allowAt) / iv), ResetAfter: next.Sub(now)}, next
}
