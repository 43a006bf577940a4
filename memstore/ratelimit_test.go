package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// TestRateLimiterOnItsClock: on the store's (fake) clock a key admits its
// burst, then exactly one per interval; a denied call changes nothing; a
// key whose TAT has passed keeps no entry, and one still ahead keeps one
// (the control); a done ctx and bad arguments change nothing.
func TestRateLimiterOnItsClock(t *testing.T) {
	bg := context.Background()
	clk := &fakeNow{t: time.Unix(1000, 0)}
	s := memstore.New(clk.now)
	lim := driver.RateLimit{Rate: 4, Period: time.Second, Burst: 2} // one per 250 ms
	allow := func(n int) driver.RateResult {
		t.Helper()
		r, err := s.AllowN(bg, "k", lim, n)
		if err != nil {
			t.Fatalf("AllowN(%d): %v", n, err)
		}
		return r
	}
	if r := allow(2); r != (driver.RateResult{Allowed: 2, ResetAfter: 500 * time.Millisecond}) {
		t.Fatalf("the burst: %+v", r)
	}
	for range 3 { // denied, repeatedly: nothing moves
		if r := allow(1); r != (driver.RateResult{RetryAfter: 250 * time.Millisecond, ResetAfter: 500 * time.Millisecond}) {
			t.Fatalf("over the burst: %+v", r)
		}
	}
	done, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.AllowN(done, "k", lim, 1); err != context.Canceled {
		t.Fatalf("done ctx: %v, want context.Canceled", err)
	}
	if _, err := s.AllowN(done, "k", lim, 3); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("n above the burst with a done ctx: %v, want ErrInvalid (checked first)", err)
	}
	clk.add(249 * time.Millisecond)
	if r := allow(1); r.Allowed != 0 || r.RetryAfter != time.Millisecond {
		t.Fatalf("1 ms early: %+v", r)
	}
	clk.add(time.Millisecond)
	if r := allow(1); r.Allowed != 1 || r.Remaining != 0 || r.ResetAfter != 500*time.Millisecond {
		t.Fatalf("one interval on: %+v", r)
	}
	if n, _ := s.KeyState(bg, "k"); n != 1 {
		t.Fatalf("KeyState with the TAT ahead = %d, want 1", n)
	}
	clk.add(500 * time.Millisecond)
	if n, _ := s.KeyState(bg, "k"); n != 0 {
		t.Fatalf("KeyState once the TAT has passed = %d, want 0", n)
	}
	if r := allow(2); r.Allowed != 2 {
		t.Fatalf("a reset key: %+v, want its burst", r)
	}
}
