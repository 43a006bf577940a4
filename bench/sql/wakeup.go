package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// wakeSample is what the waiter saw.
type wakeSample struct {
	at     time.Time
	unlock func(context.Context) error
	err    error
}

// runWakeup measures the next waiter's wake-up: two clients of lib in this
// process (each with its own pool, as two processes would have), a holder
// and a waiter. Per sample the holder takes the key, the waiter starts
// Lock, the holder keeps the key 20-70 ms (random, so a poller's phase is
// random too), then releases; the sample is the time from the start of the
// release call to the waiter's Lock returning (so it includes the release's
// own round trip). Samples are taken until dur has passed or maxN were
// taken. A waiter that gets the key before the release started is an
// overlap.
func runWakeup(c conf, lib string, dur time.Duration, maxN int, seed uint64) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	c.Goroutines = 1
	var lk [2]locker
	for i := range lk {
		l, err := newLocker(ctx, lib, c, &counter{})
		if err != nil {
			return nil, err
		}
		defer l.close()
		lk[i] = l
		u, err := l.lock(ctx, fmt.Sprintf("warm-wake-%d", i))
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := u(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	holder, waiter := lk[0], lk[1]
	rnd := rand.New(rand.NewPCG(seed, 16))
	res := &result{}
	t0 := time.Now()
	for time.Since(t0) < dur && res.Ops < int64(maxN) {
		if err := wakeOnce(ctx, holder, waiter, rnd, res); err != nil {
			res.Failures++
			if res.FirstErr == "" {
				res.FirstErr = err.Error()
			}
			break
		}
	}
	res.Wall = time.Since(t0)
	return res, nil
}

func wakeOnce(ctx context.Context, holder, waiter locker, rnd *rand.Rand, res *result) error {
	uh, err := holder.lock(ctx, lockKey)
	if err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	got := make(chan wakeSample, 1)
	go func() {
		u, err := waiter.lock(ctx, lockKey)
		got <- wakeSample{at: time.Now(), unlock: u, err: err}
	}()
	hold := time.NewTimer(time.Duration(20+rnd.IntN(51)) * time.Millisecond)
	var early *wakeSample
	select {
	case <-hold.C:
	case g := <-got:
		early = &g // the waiter returned while the holder held the key
		hold.Stop()
	}
	rel := time.Now()
	herr := uh(ctx)
	var g wakeSample
	if early != nil {
		g = *early
		if g.err == nil {
			res.Overlaps++
		}
	} else {
		g = <-got
	}
	if g.err != nil {
		return fmt.Errorf("waiter: %w", g.err)
	}
	if herr != nil {
		return fmt.Errorf("holder's release: %w", herr)
	}
	res.Ops++
	res.Lat = append(res.Lat, int64(g.at.Sub(rel)))
	if err := g.unlock(ctx); err != nil {
		return fmt.Errorf("waiter's release: %w", err)
	}
	return nil
}
