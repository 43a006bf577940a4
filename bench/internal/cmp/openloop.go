package cmp

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Arrivals is an open-loop run's offered load in one process: requests
// arrive as a Poisson process of Rate per second, drawn from Seed (each
// process of a run draws from Seed and its own index, so a seed replays
// the same schedule).
type Arrivals struct {
	Rate float64 `json:"rate"`
	Seed uint64  `json:"seed"`
}

// OpenGrace is how long an open-loop run waits, after the last arrival,
// for the requests still in flight; those it cuts count as Late.
const OpenGrace = 10 * time.Second

// Schedule is the arrival times, as offsets from the start, of a Poisson
// process of rate a.Rate over dur, drawn from a.Seed and proc. It is
// empty for a rate that is not positive.
func (a Arrivals) Schedule(proc int, dur time.Duration) []time.Duration {
	if !(a.Rate > 0) {
		return nil
	}
	rng := rand.New(rand.NewPCG(a.Seed, uint64(proc)))
	var out []time.Duration
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / a.Rate * float64(time.Second))
		if t >= dur {
			return out
		}
		out = append(out, t)
	}
}

// OpenLoop offers sched's requests to lock on key, each at its scheduled
// time whether or not earlier ones are done, through at most len(fns)
// workers, and adds them to t. Latencies run from the scheduled arrival (no
// coordinated omission): t.Wait to the grant, t.Lat to the unlock. A request
// still waiting OpenGrace after the last arrival is cut and counted Late; a
// lock, section or unlock error is a failure; both are recorded at their age
// then. t.Ops counts completed requests, t.Wall the schedule, t.CPU the CPU.
func (t *Tally) OpenLoop(sched []time.Duration, dur time.Duration, fns []LockFn, key, dir string, critical func(context.Context) error) {
	if len(fns) == 0 {
		return
	}
	pool := make(chan LockFn, len(fns))
	for _, f := range fns {
		pool <- f
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+OpenGrace)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	// A request takes a worker from pool, locks, enters the overlap marker
	// in dir, runs critical (if not nil) and unlocks.
	inside := func(ctx context.Context) error {
		mu.Lock()
		leave := t.Enter(dir)
		mu.Unlock()
		defer leave()
		if critical == nil {
			return nil
		}
		return critical(ctx)
	}
	cpu0, start := CPUTime(), time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, off := range sched {
		at := start.Add(off)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
		wg.Go(func() {
			wait, whole, err := openRequest(ctx, at, pool, key, inside)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				t.Ops++
				t.Wait = append(t.Wait, int64(wait))
				t.Lat = append(t.Lat, int64(whole))
			case ctx.Err() != nil && errors.Is(err, ctx.Err()):
				t.Late++
				age := int64(time.Since(at))
				t.Wait = append(t.Wait, age)
				t.Lat = append(t.Lat, age)
			default:
				t.Fail(err)
				t.Wait = append(t.Wait, int64(time.Since(at)))
				t.Lat = append(t.Lat, int64(time.Since(at)))
			}
		})
	}
	wg.Wait()
	t.Wall, t.CPU = dur, CPUTime()-cpu0
	t.PerWorker = append(t.PerWorker, t.Ops)
}

// openRequest is one arrival at at: a worker from pool, the lock, critical
// and the unlock (both finished even if ctx ends), the worker back. It
// returns the time from at to the grant and to the unlock's return.
func openRequest(ctx context.Context, at time.Time, pool chan LockFn, key string, critical func(context.Context) error) (wait, whole time.Duration, err error) {
	var lock LockFn
	select {
	case lock = <-pool:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	defer func() { pool <- lock }()
	unlock, err := lock(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, errors.Join(ctx.Err(), err)
		}
		return 0, 0, err
	}
	wait = time.Since(at)
	cerr := critical(context.WithoutCancel(ctx))
	uerr := unlock(context.WithoutCancel(ctx))
	return wait, time.Since(at), errors.Join(cerr, uerr)
}

// Quantiles are a latency sample's p50, p99 and p99.9 (nearest rank below).
type Quantiles struct{ P50, P99, P999 time.Duration }

// QuantilesOf returns the quantiles of ns (nanoseconds); zero if empty.
func QuantilesOf(ns []int64) Quantiles {
	if len(ns) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	at := func(permille int) time.Duration { return time.Duration(s[(len(s)-1)*permille/1000]) }
	return Quantiles{at(500), at(990), at(999)}
}
