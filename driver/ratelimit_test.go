package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestGCRABurstThenRate: from a fresh key, Burst requests are admitted at
// once, the next is denied until one interval has passed, and a denied call
// returns the TAT unchanged.
func TestGCRABurstThenRate(t *testing.T) {
	lim := driver.RateLimit{Rate: 10, Period: time.Second, Burst: 3} // one per 100 ms
	now := time.Unix(1000, 0)
	var tat time.Time
	for i := range 3 {
		var r driver.RateResult
		r, tat = driver.GCRA(now, tat, lim, 1)
		if want := (driver.RateResult{Allowed: 1, Remaining: 2 - i, ResetAfter: time.Duration(i+1) * 100 * time.Millisecond}); r != want {
			t.Fatalf("call %d: %+v, want %+v", i, r, want)
		}
	}
	r, after := driver.GCRA(now.Add(99*time.Millisecond), tat, lim, 1)
	if want := (driver.RateResult{RetryAfter: time.Millisecond, ResetAfter: 201 * time.Millisecond}); r != want || !after.Equal(tat) {
		t.Fatalf("denied: %+v (TAT moved %v), want %+v and the TAT unchanged", r, after.Sub(tat), want)
	}
	if r, _ = driver.GCRA(now.Add(100*time.Millisecond), tat, lim, 1); r.Allowed != 1 || r.Remaining != 0 {
		t.Fatalf("one interval later: %+v, want admitted with 0 remaining", r)
	}
	if r, _ = driver.GCRA(now.Add(150*time.Millisecond), tat, lim, 2); r.Allowed != 0 || r.RetryAfter != 50*time.Millisecond || r.Remaining != 1 {
		t.Fatalf("2 with 1 left: %+v, want denied, retry after 50ms, 1 remaining", r)
	}
}

// TestValidateRate: every bad argument matches ErrInvalid, n above the
// burst as a *BurstExceededError; a good one passes.
func TestValidateRate(t *testing.T) {
	ok := driver.RateLimit{Rate: 5, Period: time.Second, Burst: 5}
	if err := driver.ValidateRate("k", ok, 5); err != nil {
		t.Fatalf("valid: %v", err)
	}
	bad := []struct {
		key   string
		limit driver.RateLimit
		n     int
	}{
		{"", ok, 1}, {strings.Repeat("k", driver.MaxKeyLen+1), ok, 1}, {"\xff", ok, 1},
		{"k", ok, 0}, {"k", ok, 6},
		{"k", driver.RateLimit{Rate: 0, Period: time.Second, Burst: 1}, 1},
		{"k", driver.RateLimit{Rate: 1, Period: 0, Burst: 1}, 1},
		{"k", driver.RateLimit{Rate: 1, Period: time.Second, Burst: 0}, 1},
		{"k", driver.RateLimit{Rate: 2_000_000, Period: time.Second, Burst: 1}, 1},
		{"k", driver.RateLimit{Rate: 1, Period: 24 * time.Hour, Burst: 367}, 1},
	}
	for _, b := range bad {
		if err := driver.ValidateRate(b.key, b.limit, b.n); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ValidateRate(%.8q, %v, %d) = %v, want ErrInvalid", b.key, b.limit, b.n, err)
		}
	}
	var be *driver.BurstExceededError
	if err := driver.ValidateRate("k", ok, 6); !errors.As(err, &be) || be.N != 6 || be.Burst != 5 {
		t.Fatalf("n 6 of burst 5: %v, want *BurstExceededError{6, 5}", err)
	}
}

// TestRateLimitIntervalRoundsUp: the interval is never shorter than
// Period/Rate, so a limit is never faster than asked.
func TestRateLimitIntervalRoundsUp(t *testing.T) {
	if got := (driver.RateLimit{Rate: 3, Period: time.Second}).Interval(); got != 333333334 {
		t.Fatalf("1s/3 = %d ns, want 333333334", got)
	}
}
