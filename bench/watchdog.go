package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// runWatchdog holds j.Scenario.Requests locks with automatic renewal for
// j.Hold and measures the process CPU spent meanwhile (getrusage), the
// renewal round trips, and whether every lock is still held — by the lease
// (Err is nil) and in Redis (the owner field is still our token).
func runWatchdog(j job, rdb *redis.Client, rt *counter, res *result) error {
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := dlock.New(st, dlock.WithAutoRenew(j.Lease))
	if err != nil {
		return err
	}
	ctx := context.Background()
	n := j.Scenario.Requests
	leases := make([]*dlock.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, j.Scenario.Goroutines)
	t0 := time.Now()
	for g := range j.Scenario.Goroutines {
		wg.Go(func() {
			for i := g; i < n; i += j.Scenario.Goroutines {
				l, err := c.Lock(ctx, "bench:wd:"+strconv.Itoa(i))
				if err != nil {
					errs <- err
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("acquiring: %w", err)
	}
	res.Extra["acquire_all_ms"] = float64(time.Since(t0).Milliseconds())

	cpu0 := cpuTime()
	rt0 := rt.n.Load()
	w0 := time.Now()
	time.Sleep(j.Hold) // holding is the thing measured: the renewal loop runs meanwhile
	wall := time.Since(w0)
	cpu := cpuTime() - cpu0
	res.RoundTrips = rt.n.Load() - rt0
	res.Wall = wall
	res.Extra["cpu_pct_of_one_core"] = 100 * cpu.Seconds() / wall.Seconds()
	res.Extra["renewal_round_trips"] = float64(res.RoundTrips)

	held, lost := verifyHeld(ctx, rdb, st, leases)
	res.Extra["lost"] = float64(lost)
	res.Successes, res.Final, res.Expected = int64(held), int64(held), int64(n)
	res.Failures = int64(lost)
	for _, l := range leases {
		_ = l.Release(ctx)
	}
	return nil
}

// verifyHeld counts leases still valid locally and owned in Redis.
func verifyHeld(ctx context.Context, rdb *redis.Client, st *redisstore.Store, leases []*dlock.Lease) (held, lost int) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(leases))
	for i, l := range leases {
		lock, _ := st.Keys(l.Key())
		cmds[i] = pipe.Get(ctx, lock) // "<holds>:<fence>:<call id>:<owner>", see redisstore
	}
	_, _ = pipe.Exec(ctx)
	for i, l := range leases {
		if l.Err() == nil && strings.HasPrefix(cmds[i].Val(), "1:") && strings.HasSuffix(cmds[i].Val(), ":"+l.Token()) {
			held++
		} else {
			lost++
		}
	}
	return held, lost
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
