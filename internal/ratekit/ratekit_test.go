package ratekit_test

import (
	"context"
	"sync"
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

// stalling is a limiter whose every call waits behind one call that stalls
// for a while: a server or a machine that stopped answering.
type stalling struct {
	driver.RateLimiter
	mu    sync.Mutex
	once  sync.Once
	stall time.Duration
}

func (s *stalling) AllowN(ctx context.Context, key string, l driver.RateLimit, n int) (driver.RateResult, error) {
	s.mu.Lock()
	s.once.Do(func() { time.Sleep(s.stall) }) // the fault: no answer for stall
	s.mu.Unlock()
	return s.RateLimiter.AllowN(ctx, key, l, n)
}

// TestStallIsNotCountedAgainstTheLimiter: a 400 ms stall at 100/s, before
// the first answer (the fresh key's bucket is full), drops 40 intervals of
// budget; the report counts them and the check passes, the upper bound
// untouched. (never, in TestRunChecksBothBounds, still fails: answers that
// come at once drop nothing.)
func TestStallIsNotCountedAgainstTheLimiter(t *testing.T) {
	run := ratekit.Run{Limit: driver.RateLimit{Rate: 100, Period: time.Second, Burst: 20}, For: 600 * time.Millisecond, Goroutines: 4}
	s := &stalling{RateLimiter: memstore.New(nil), stall: 400 * time.Millisecond}
	rep := run.Exec(context.Background(), "k", []ratekit.Allower{s})
	t.Logf("%+v", rep)
	if rep.Stalled < 35 {
		t.Errorf("Stalled = %d after a 400 ms stall; want about 40", rep.Stalled)
	}
	if err := run.Check(rep, time.Nanosecond); err != nil {
		t.Errorf("a stall of the server failed the limiter: %v", err)
	}
}
