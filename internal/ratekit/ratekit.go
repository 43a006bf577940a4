// Package ratekit is the exactness run of a rate limiter, for the stores'
// tests: goroutines on several clients ask for one key's budget as fast as
// they can, and the count admitted is held to GCRA's bounds, with no
// tolerance above and a small one below.
package ratekit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
)

// Allower is what the run needs of a client: driver.RateLimiter's AllowN
// (a store, or a broken variant of one for a control).
type Allower interface {
	AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error)
}

// Run is the shape of a run: Goroutines per client, asking for one each
// under Limit for For.
type Run struct {
	Limit      driver.RateLimit
	For        time.Duration
	Goroutines int
}

// Report is what a run saw: the requests admitted and the calls answered;
// Elapsed from the first call sent to the last answer received; Together,
// the time every goroutine was asking (from the last first call sent to
// the first last answer); the first errors (a goroutine stops at its
// first).
type Report struct {
	Admitted, Calls   int64
	Elapsed, Together time.Duration
	Errors            []error
}

// Exec runs r on clients, one key, and returns the report. Each goroutine
// stops after For or at its first error, and after a million calls at
// most.
func (r Run) Exec(ctx context.Context, key string, clients []Allower) Report {
	var admitted, calls atomic.Int64
	var mu sync.Mutex
	var rep Report
	var lastFirst, firstLast time.Time
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(r.For)
	for _, c := range clients {
		for range r.Goroutines {
			wg.Go(func() {
				first := time.Now()
				var err error
				for i := 0; i < 1_000_000 && time.Now().Before(end); i++ {
					var res driver.RateResult
					if res, err = c.AllowN(ctx, key, r.Limit, 1); err != nil {
						break
					}
					calls.Add(1)
					admitted.Add(int64(res.Allowed))
				}
				last := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && len(rep.Errors) < 5 {
					rep.Errors = append(rep.Errors, err)
				}
				if first.After(lastFirst) {
					lastFirst = first
				}
				if firstLast.IsZero() || last.Before(firstLast) {
					firstLast = last
				}
			})
		}
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.Together = max(0, firstLast.Sub(lastFirst))
	rep.Admitted, rep.Calls = admitted.Load(), calls.Load()
	return rep
}

// Most is the most a limit admits over elapsed: the burst and one per
// interval (of the store's unit: the interval rounded up to unit).
func Most(limit driver.RateLimit, unit, elapsed time.Duration) int64 {
	return int64(limit.Burst) + int64(elapsed/roundUp(limit.Interval(), unit))
}

// Check holds rep to the bounds of r.Limit on a store whose clock unit is
// unit: no errors, at most Most over Elapsed (exact: GCRA admits no more
// whoever asks), and at least 99 % of Most over Together (someone was
// always asking). Its error names the figures.
func (r Run) Check(rep Report, unit time.Duration) error {
	if len(rep.Errors) > 0 {
		return fmt.Errorf("ratekit: %d goroutines failed, the first with %w", len(rep.Errors), rep.Errors[0])
	}
	most, least := Most(r.Limit, unit, rep.Elapsed), Most(r.Limit, unit, rep.Together)*99/100
	if rep.Admitted > most {
		return fmt.Errorf("ratekit: %d of %d calls admitted in %v: more than the burst and one per interval (%d)", rep.Admitted, rep.Calls, rep.Elapsed, most)
	}
	if rep.Admitted < least {
		return fmt.Errorf("ratekit: %d of %d calls admitted while all asked for %v: fewer than 99 %% of the burst and one per interval (%d)", rep.Admitted, rep.Calls, rep.Together, least)
	}
	return nil
}

func roundUp(d, unit time.Duration) time.Duration {
	if unit <= 0 {
		return d
	}
	return (d + unit - 1) / unit * unit
}
