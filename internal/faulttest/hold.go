package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/overlap"
	"example.com/dlock/internal/testkit"
)

// Seed returns the seed of a test's randomness: the value of the
// environment variable env if set (the test fails if it is not a number),
// else a random one. It logs it with how to use it again (a seed fixes
// what the test draws; the interleaving of processes still varies).
func Seed(t testing.TB, env string) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv(env); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
	}
	t.Logf("seed %d (%s=%d uses it again)", seed, env, seed)
	return seed
}

// Within polls cond (testkit.Eventually) until it holds or d elapses; it reports
// whether cond held (it is called once more at the deadline).
func Within(d time.Duration, cond func() bool) bool {
	return testkit.Eventually(d, cond)
}

// Hold acts as the holder of l, acquired at from, for d: until d has
// passed or, if heed, until l reports its loss. It then releases l (a lost
// lease's release may fail: nothing to undo; the error and the time it
// took are recorded), records the window in rec and returns it.
func Hold(l *dlock.Lease, from time.Time, who string, d time.Duration, heed bool, rec *overlap.Recorder) overlap.Window {
	x := overlap.Window{Who: who, From: from, Fence: l.Fence()}
	work := time.NewTimer(d) // the critical section's work
	defer work.Stop()
	if heed {
		select {
		case <-work.C:
		case <-l.Done():
			x.Lost = true
		}
	} else {
		<-work.C
	}
	x.To = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	x.RelErr = l.Release(ctx)
	x.Release = time.Since(x.To)
	rec.Add(x)
	return x
}

// Contend runs a worker on c that locks key (waiting at most wait), holds
// it 5–30 ms (drawn from seed) heeding its loss, and releases it, until
// stop closes; a failed Lock is counted in rec (rec.Fail). It returns when
// the worker has stopped: a Lock in progress is cancelled by stop.
func Contend(c *dlock.Client, who, key string, wait time.Duration, seed uint64, stop <-chan struct{}, rec *overlap.Recorder) {
	rng := rand.New(rand.NewPCG(seed, 14))
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		l, err := c.Lock(ctx, key, dlock.WithWait(wait))
		if err != nil {
			cancel()
			rec.Fail(err)
			continue
		}
		Hold(l, time.Now(), who, time.Duration(5+rng.IntN(25))*time.Millisecond, true, rec)
		cancel()
	}
}

// Contenders starts n Contend workers on key, worker i on
// clients[i%len(clients)] named "c<client>/w<i>" with seed+i. The returned
// stop stops them and returns once all have.
func Contenders(clients []*dlock.Client, n int, key string, wait time.Duration, seed uint64, rec *overlap.Recorder) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := i % len(clients)
		wg.Go(func() { Contend(clients[c], fmt.Sprintf("c%d/w%d", c, i), key, wait, seed+uint64(i), done, rec) })
	}
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}
