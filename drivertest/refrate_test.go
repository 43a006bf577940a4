package drivertest_test

import (
	"context"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// rateMutant is memstore's RateLimiter, and nothing else of it (so that
// only the rate limiter suite runs), with one deliberate bug per rate
// mutation laid over it; without one it is the control.
type rateMutant struct {
	m   *memstore.Store
	mut mutation
	// seen is every key ever asked for, kept by rate-no-expiry.
	mu   *sync.Mutex
	seen map[string]bool
}

// The rate limiter mutations: each breaks one rule of driver.RateLimiter.
const (
	rateChargesDenied mutation = "rate-charges-denied" // a denied request is charged all the same
	rateNoBurst       mutation = "rate-no-burst"       // a burst of 1 whatever the limit says
	rateOffByOne      mutation = "rate-off-by-one"     // one more than the burst
	rateNoLimit       mutation = "rate-no-limit"       // everything admitted
	ratePartialGrant  mutation = "rate-partial-grant"  // n > 1 takes what is left and says all n
	rateNoExpiry      mutation = "rate-no-expiry"      // every key's state is kept for ever
	rateCallerClock   mutation = "rate-caller-clock"   // each client decides on its own clock and state
)

var _ driver.RateLimiter = rateMutant{}

func newRateMutant(m mutation) rateMutant {
	return rateMutant{m: memstore.New(nil), mut: m, mu: new(sync.Mutex), seen: map[string]bool{}}
}

func (s rateMutant) Model() driver.Model { return s.m.Model() }

func (s rateMutant) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	asked := limit
	switch s.mut {
	case rateNoBurst:
		if n > 1 {
			return driver.RateResult{RetryAfter: limit.Interval()}, ctx.Err()
		}
		limit.Burst = 1
	case rateOffByOne:
		limit.Burst++
	case rateNoLimit:
		return driver.RateResult{Allowed: n, Remaining: limit.Burst - n}, ctx.Err()
	case rateNoExpiry:
		s.mu.Lock()
		s.seen[key] = true
		s.mu.Unlock()
	}
	r, err := s.m.AllowN(ctx, key, limit, n)
	if err != nil || r.Allowed != 0 {
		return r, err
	}
	switch {
	case s.mut == rateChargesDenied:
		asked.Burst += n // admitted over a burst of n more: the TAT moves on
		_, err = s.m.AllowN(ctx, key, asked, n)
	case s.mut == ratePartialGrant && r.Remaining > 0:
		r, err = s.m.AllowN(ctx, key, limit, r.Remaining)
		r.Allowed = n
	}
	return r, err
}

// Retention and KeyState implement drivertest.StateReporter, as memstore's
// (with the keys rate-no-expiry keeps).
func (s rateMutant) Retention() time.Duration { return s.m.Retention() }

func (s rateMutant) KeyState(ctx context.Context, key string) (int, error) {
	n, err := s.m.KeyState(ctx, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] {
		n++
	}
	return n, err
}

// callerClock is rate-caller-clock: clients that share the TATs but each
// decide on its own clock, 90 minutes ahead of the one made before it, as a
// limiter that reads the caller's clock does on skewed hosts.
type callerClock struct {
	skew time.Duration
	mu   *sync.Mutex
	tats map[string]time.Time
}

// callerClocks returns a Harness.New for rate-caller-clock.
func callerClocks() func() driver.Store {
	mu, tats, next := new(sync.Mutex), map[string]time.Time{}, time.Duration(0)
	return func() driver.Store {
		mu.Lock()
		defer mu.Unlock()
		c := callerClock{skew: next, mu: mu, tats: tats}
		next += 90 * time.Minute
		return c
	}
}

func (c callerClock) Model() driver.Model { return memstore.New(nil).Model() }

func (c callerClock) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RateResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, tat := driver.GCRA(time.Now().Add(c.skew), c.tats[key], limit, n)
	c.tats[key] = tat
	return r, nil
}
