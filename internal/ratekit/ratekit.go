// Package ratekit is the exactness run of a rate limiter, for the stores'
// tests: goroutines on several clients ask for one key's budget as fast as
// they can, and the count admitted is held to GCRA's bounds, with no
// tolerance above and a small one below.
package ratekit

import (
	"context"
	"fmt"
	"slices"
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
// the first last answer); Stalled, the intervals of budget the limit may
// have dropped while no answer came (see stalled); the first errors (a
// goroutine stops at its first).
type Report struct {
	Admitted, Calls   int64
	Elapsed, Together time.Duration
	Stalled           int64
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
	var answers []answer
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(r.For)
	for _, c := range clients {
		for range r.Goroutines {
			wg.Go(func() {
				first := time.Now()
				var err error
				var mine []answer
				for i := 0; i < 1_000_000 && time.Now().Before(end); i++ {
					var res driver.RateResult
					if res, err = c.AllowN(ctx, key, r.Limit, 1); err != nil {
						break
					}
					mine = append(mine, answer{time.Now(), res.Remaining})
					calls.Add(1)
					admitted.Add(int64(res.Allowed))
				}
				last := time.Now()
				mu.Lock()
				defer mu.Unlock()
				answers = append(answers, mine...)
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
	rep.Stalled = stalled(r.Limit, answers, lastFirst, firstLast)
	return rep
}

// answer is when a call was answered and the Remaining it reported.
type answer struct {
	at        time.Time
	remaining int
}

// stalled counts the intervals of budget a limit may have dropped between
// from and to while no answer came (the machine or the server stalled):
// over a gap between answers the bucket refills one request per interval
// from the Remaining the gap's first answer reported (the whole burst at
// from, a fresh key), and each interval past full is lost to the cap.
func stalled(limit driver.RateLimit, answers []answer, from, to time.Time) int64 {
	slices.SortFunc(answers, func(a, b answer) int { return a.at.Compare(b.at) })
	iv := limit.Interval()
	var lost int64
	prev := answer{from, limit.Burst}
	for _, a := range answers {
		if a.at.Before(from) {
			prev.remaining = a.remaining
			continue
		}
		at := a.at
		if at.After(to) {
			at = to
		}
		if accrued, room := int64(at.Sub(prev.at)/iv), int64(limit.Burst-prev.remaining); accrued > room {
			lost += accrued - room
		}
		if prev = (answer{at, a.remaining}); !at.Before(to) {
			break
		}
	}
	return lost
}

// Most is the most a limit admits over elapsed: the burst and one per
// interval (of the store's unit: the interval rounded up to unit).
func Most(limit driver.RateLimit, unit, elapsed time.Duration) int64 {
	return int64(limit.Burst) + int64(elapsed/roundUp(limit.Interval(), unit))
}

// Check holds rep to the bounds of r.Limit on a store whose clock unit is
// unit: no errors, at most Most over Elapsed (exact: GCRA admits no more
// whoever asks), and at least 99 % of Most over Together (someone was
// always asking) less rep.Stalled (budget the cap dropped while no answer
// came: a stall longer than the burst, seen at load 8-19). Its error
// names the figures.
func (r Run) Check(rep Report, unit time.Duration) error {
	if len(rep.Errors) > 0 {
		return fmt.Errorf("ratekit: %d goroutines failed, the first with %w", len(rep.Errors), rep.Errors[0])
	}
	most, least := Most(r.Limit, unit, rep.Elapsed), Most(r.Limit, unit, rep.Together)*99/100-rep.Stalled
	if rep.Admitted > most {
		return fmt.Errorf("ratekit: %d of %d calls admitted in %v: more than the burst and one per interval (%d)", rep.Admitted, rep.Calls, rep.Elapsed, most)
	}
	if rep.Admitted < least {
		return fmt.Errorf("ratekit: %d of %d calls admitted while all asked for %v: fewer than 99 %% of the burst and one per interval, less %d dropped in stalls (%d)", rep.Admitted, rep.Calls, rep.Together, rep.Stalled, least)
	}
	return nil
}

func roundUp(d, unit time.Duration) time.Duration {
	if unit <= 0 {
		return d
	}
	return (d + unit - 1) / unit * unit
}
