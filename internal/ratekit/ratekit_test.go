package ratekit_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/ratekit"
	"example.com/dlock/memstore"
)

// always admits everything: the broken limiter the check must refuse.
type always struct{}

func (always) AllowN(_ context.Context, _ string, _ driver.RateLimit, n int) (driver.RateResult, error) {
	return driver.RateResult{Allowed: n}, nil
}

// never admits nothing: too few for the lower bound.
type never struct{}

func (never) AllowN(context.Context, string, driver.RateLimit, int) (driver.RateResult, error) {
	return driver.RateResult{}, nil
}

// TestRunChecksBothBounds: memstore (exact GCRA on the wall clock) passes
// the check from 2 clients × 4 goroutines; a limiter that admits all
// fails the upper bound, one that admits none the lower (the controls).
func TestRunChecksBothBounds(t *testing.T) {
	run := ratekit.Run{Limit: driver.RateLimit{Rate: 100, Period: time.Second, Burst: 20}, For: 300 * time.Millisecond, Goroutines: 4}
	m := memstore.New(nil)
	ctx := context.Background()
	if err := run.Check(run.Exec(ctx, "k", []ratekit.Allower{m, m}), time.Nanosecond); err != nil {
		t.Fatalf("memstore: %v", err)
	}
	for _, bad := range []ratekit.Allower{always{}, never{}} {
		if err := run.Check(run.Exec(ctx, "k", []ratekit.Allower{bad}), time.Nanosecond); err == nil {
			t.Errorf("%T passed the check", bad)
		}
	}
}
