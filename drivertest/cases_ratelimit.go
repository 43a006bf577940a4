package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// The rate limiter suite: the rules of driver.RateLimiter, on stores that
// offer it. Each case names the rule it checks. Most run at a slow rate
// (one an hour), where the elapsed time of the case cannot admit anything
// and answers are exact; the timed ones (refill, expiry, the race) are in
// cases_ratelimit_time.go.

// rateSuite lists the cases of the rate limiter suite in the order they
// run.
func (s *suite) rateSuite() []primitiveCase {
	cs := []struct {
		name string
		fn   func(*testing.T, driver.RateLimiter)
	}{
		{"AdmitsTheBurstThenDenies", s.testRateBurst},
		{"DeniedChangesNothing", s.testRateDenied},
		{"ManyAllOrNothing", s.testRateAllOrNothing},
		{"ClientsShareOneBudget", s.testRateShared},
		{"CancelledContextChangesNothing", s.testRateCancelled},
		{"InvalidArgumentsChangeNothing", s.testRateInvalid},
		{"RefillsOneIntervalAtATime", s.testRateRefill},
		{"RaceAdmitsAtMostTheBudget", s.testRateRace},
		{"IdleStateExpires", s.testRateIdleExpires},
	}
	pcs := make([]primitiveCase, len(cs))
	for i, c := range cs {
		pcs[i] = primitiveCase{c.name, func(t *testing.T, st driver.Store) { c.fn(t, st.(driver.RateLimiter)) }}
	}
	return pcs
}

// rateClient is a new client of the store as a RateLimiter.
func (s *suite) rateClient(t *testing.T) driver.RateLimiter {
	t.Helper()
	st := s.store(t)
	m, ok := st.(driver.RateLimiter)
	if !ok {
		t.Fatalf("drivertest: Harness.New returned a %T, which is no driver.RateLimiter", st)
	}
	return m
}

// slowRate is one an hour: nothing comes back while a case runs.
func slowRate(burst int) driver.RateLimit {
	return driver.RateLimit{Rate: 1, Period: time.Hour, Burst: burst}
}

func allowN(t *testing.T, m driver.RateLimiter, key string, lim driver.RateLimit, n int) driver.RateResult {
	t.Helper()
	r, err := m.AllowN(ctx(t), key, lim, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %v, %d): %v", key, lim, n, err)
	}
	return r
}

// within asserts that got is in (want − slack, want].
func (s *suite) within(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got > want || got <= want-s.slack {
		t.Fatalf("%s = %v, want in (%v, %v]", what, got, want-s.slack, want)
	}
}

// wantAdmitted asserts that AllowN(n) at a slow rate is admitted with
// remaining left and a reset after used intervals (less the time elapsed).
func (s *suite) wantAdmitted(t *testing.T, m driver.RateLimiter, key string, lim driver.RateLimit, n, remaining, used int) {
	t.Helper()
	r := allowN(t, m, key, lim, n)
	if r.Allowed != n || r.Remaining != remaining || r.RetryAfter != 0 {
		t.Fatalf("AllowN(%d) = %+v: want Allowed %d, Remaining %d, RetryAfter 0", n, r, n, remaining)
	}
	s.within(t, "ResetAfter", r.ResetAfter, time.Duration(used)*lim.Interval())
}

// wantDenied asserts that AllowN(n) at a slow rate is denied with remaining
// left, admissible after retry intervals and reset after used ones (less
// the time elapsed), and returns the result.
func (s *suite) wantDenied(t *testing.T, m driver.RateLimiter, key string, lim driver.RateLimit, n, remaining, retry, used int) driver.RateResult {
	t.Helper()
	r := allowN(t, m, key, lim, n)
	if r.Allowed != 0 || r.Remaining != remaining {
		t.Fatalf("AllowN(%d) = %+v: want denied (Allowed 0) with Remaining %d", n, r, remaining)
	}
	s.within(t, "RetryAfter", r.RetryAfter, time.Duration(retry)*lim.Interval())
	s.within(t, "ResetAfter", r.ResetAfter, time.Duration(used)*lim.Interval())
	return r
}

// testRateBurst: a fresh key admits exactly its burst, one by one, each
// result counting down; the next request is denied until one interval after
// the first.
func (s *suite) testRateBurst(t *testing.T, m driver.RateLimiter) {
	key, lim := Key(t), slowRate(5)
	for i := 1; i <= lim.Burst; i++ {
		s.wantAdmitted(t, m, key, lim, 1, lim.Burst-i, i)
	}
	s.wantDenied(t, m, key, lim, 1, 0, 1, lim.Burst)
	s.wantDenied(t, s.rateClient(t), key, lim, 1, 0, 1, lim.Burst)
}

// testRateDenied: denied requests, however many, charge nothing: their
// RetryAfter does not grow, and the budget left is still there after them.
func (s *suite) testRateDenied(t *testing.T, m driver.RateLimiter) {
	key, lim := Key(t), slowRate(3)
	s.wantAdmitted(t, m, key, lim, 2, 1, 2)
	first := s.wantDenied(t, m, key, lim, 2, 1, 1, 2)
	for range 4 {
		if r := s.wantDenied(t, m, key, lim, 2, 1, 1, 2); r.RetryAfter > first.RetryAfter {
			t.Fatalf("RetryAfter grew from %v to %v over denied requests", first.RetryAfter, r.RetryAfter)
		}
	}
	s.wantAdmitted(t, m, key, lim, 1, 0, 3)
}

// testRateAllOrNothing: n > 1 is admitted whole or not at all; a denied
// n's RetryAfter is when all n fit.
func (s *suite) testRateAllOrNothing(t *testing.T, m driver.RateLimiter) {
	key, lim := Key(t), slowRate(5)
	s.wantAdmitted(t, m, key, lim, 3, 2, 3)
	s.wantDenied(t, m, key, lim, 3, 2, 1, 3)
	s.wantAdmitted(t, m, key, lim, 2, 0, 5)
	s.wantDenied(t, m, key, lim, 5, 0, 5, 5)
}

// testRateShared: clients of the store draw on one budget per key; another
// key's is its own.
func (s *suite) testRateShared(t *testing.T, m driver.RateLimiter) {
	key, lim, b := Key(t), slowRate(4), s.rateClient(t)
	s.wantAdmitted(t, m, key, lim, 2, 2, 2)
	s.wantAdmitted(t, b, key, lim, 2, 0, 4)
	s.wantDenied(t, m, key, lim, 1, 0, 1, 4)
	s.wantDenied(t, b, key, lim, 1, 0, 1, 4)
	s.wantAdmitted(t, b, Key(t), lim, 4, 0, 4)
}

// testRateCancelled: a call with a done ctx fails with its error and
// charges nothing.
func (s *suite) testRateCancelled(t *testing.T, m driver.RateLimiter) {
	key, lim := Key(t), slowRate(3)
	s.wantAdmitted(t, m, key, lim, 1, 2, 1)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := m.AllowN(c, key, lim, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("AllowN with a done ctx = %+v, %v; want an error matching context.Canceled", r, err)
	}
	s.wantAdmitted(t, m, key, lim, 2, 0, 3)
}

// testRateInvalid: every bad argument is refused with ErrInvalid before any
// I/O (even with a done ctx), n above the burst as a *BurstExceededError,
// and nothing is charged.
func (s *suite) testRateInvalid(t *testing.T, m driver.RateLimiter) {
	key, lim := Key(t), slowRate(3)
	s.wantAdmitted(t, m, key, lim, 1, 2, 1)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	bad := []struct {
		key string
		lim driver.RateLimit
		n   int
	}{
		{key, lim, 0}, {key, lim, -1}, {key, lim, 4},
		{key, driver.RateLimit{Rate: 0, Period: time.Hour, Burst: 3}, 1},
		{key, driver.RateLimit{Rate: 1, Period: 0, Burst: 3}, 1},
		{key, driver.RateLimit{Rate: 1, Period: -time.Hour, Burst: 3}, 1},
		{key, driver.RateLimit{Rate: 1, Period: time.Hour, Burst: 0}, 1},
		{"", lim, 1}, {strings.Repeat("k", driver.MaxKeyLen+1), lim, 1}, {"\xff", lim, 1},
	}
	for _, c := range [](context.Context){done, ctx(t)} {
		for _, b := range bad {
			if r, err := m.AllowN(c, b.key, b.lim, b.n); !errors.Is(err, driver.ErrInvalid) || r != (driver.RateResult{}) {
				t.Fatalf("AllowN(%.12q, %v, %d) = %+v, %v; want a zero result and an error matching ErrInvalid", b.key, b.lim, b.n, r, err)
			}
		}
	}
	var be *driver.BurstExceededError
	if _, err := m.AllowN(ctx(t), key, lim, 4); !errors.As(err, &be) || be.N != 4 || be.Burst != 3 {
		t.Fatalf("AllowN(4) of a burst of 3 = %v, want *BurstExceededError{4, 3}", err)
	}
	s.wantAdmitted(t, m, key, lim, 2, 0, 3)
}
