package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/redlock"
)

// The fault tests use leases of 500 ms and a node timeout of 100 ms: long
// enough for a shared, loaded 2-core machine running the race detector,
// short enough to keep the tests quick.
const (
	faultTTL         = 500 * time.Millisecond
	faultNodeTimeout = 100 * time.Millisecond
)

var faultOpts = &redlock.Options{NodeTimeout: faultNodeTimeout}

// hammer runs clients×cycles critical sections on one key, each client with
// its own Redlock store over its own connections (like separate processes),
// recording every section. locked == false runs the sections without any
// lock (the negative control).
func hammer(t *testing.T, c *cluster, clients, cycles int, seed uint64, locked bool) *recorder {
	t.Helper()
	rec := &recorder{}
	deadline := time.Now().Add(60 * time.Second) // bounded whatever the load
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for id := range clients {
		cl := newClient(t, c.independentStore(t, faultOpts), dlock.WithAutoRenew(faultTTL), dlock.WithWait(20*time.Second))
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		var fence uint64
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := func(context.Context) error {
				rec.run(id, fence, func() { time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond) })
				return nil
			}
			for range cycles {
				var err error
				if time.Now().After(deadline) {
					return
				}
				if locked {
					var l *dlock.Lease
					l, err = cl.Lock(context.Background(), "hammer")
					if errors.Is(err, dlock.ErrNotAcquired) {
						// A wait bound elapsed: liveness, not safety. Under
						// heavy load four clients can split the three live
						// nodes for a while; the caller judges progress.
						rec.waitsTimedOut.Add(1)
						continue
					}
					if err == nil {
						fence = l.Fence()
						err = work(nil)
						// A release that reaches no majority is not a
						// safety problem: the key expires at its TTL.
						if rerr := l.Release(context.Background()); rerr != nil && !errors.Is(rerr, dlock.ErrUnavailable) {
							err = rerr
						} else if rerr != nil {
							rec.releaseFailed.Add(1)
						}
					}
				} else {
					fence++
					err = work(nil)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("client: %v", err)
	}
	return rec
}

// TestMinorityDownKeepsMutualExclusion: with 2 of 5 nodes killed (SIGKILL)
// or paused (SIGSTOP), 4 clients run 1000 lock cycles on one key with no
// overlapping critical sections and strictly increasing fences. Liveness:
// at least 900 of them complete within 60 s (a wait whose 20 s bound
// elapsed is counted, not fatal: at a load average of 16 on 2 cores all
// four clients once timed out together).
func TestMinorityDownKeepsMutualExclusion(t *testing.T) {
	for _, mode := range []string{"killed", "paused"} {
		t.Run(mode, func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			c := startCluster(t, 5)
			for _, s := range c.servers[3:] {
				if mode == "killed" {
					s.Kill()
				} else {
					s.Pause()
					t.Cleanup(s.Resume)
				}
			}
			start := time.Now()
			rec := hammer(t, c, 4, 250, seed, true)
			t.Logf("1000 cycles in %v", time.Since(start))
			rec.assertClean(t, 900)
			// Resume before the stores close: redisstore's Close waits for
			// subscriptions still dialling a stopped server.
			for _, s := range c.servers[3:] {
				s.Resume()
			}
		})
	}
}

// TestHammerNegativeControl: the same load without the lock overlaps, so the
// recorder can see a violation.
func TestHammerNegativeControl(t *testing.T) {
	seed := rand.Uint64()
	c := startCluster(t, 1)
	rec := hammer(t, c, 4, 100, seed, false)
	n, over, _, _ := rec.check()
	t.Logf("seed %d: %d sections, %d overlaps without a lock", seed, n, over)
	if over == 0 {
		t.Fatalf("seed %d: no overlap without a lock: the detector has no teeth", seed)
	}
}

// TestMinorityDownLatency: with 2 of 5 nodes paused, each uncontended
// acquisition returns within the node timeout per round trip (grant, then
// fence raise), because the fan-out stops at the majority; so does a failed
// one.
func TestMinorityDownLatency(t *testing.T) {
	c := startCluster(t, 5)
	for _, s := range c.servers[3:] {
		s.Pause()
		t.Cleanup(s.Resume)
	}
	const nodeTimeout = faultNodeTimeout
	cl := newClient(t, c.store(t, faultOpts), dlock.WithTTL(faultTTL))
	var worst time.Duration
	failed := 0
	for range 50 {
		start := time.Now()
		l, err := cl.TryLock(testCtx(t), "latency")
		el := time.Since(start)
		worst = max(worst, el)
		switch {
		case errors.Is(err, dlock.ErrUnavailable):
			failed++ // a healthy node slower than the timeout on a loaded machine
			continue
		case err != nil:
			t.Fatalf("TryLock with 3 of 5 nodes up: %v", err)
		}
		if err := l.Release(testCtx(t)); err != nil && !errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("Release: %v", err)
		}
	}
	t.Logf("worst acquisition with 2 of 5 nodes paused: %v (%d of 50 without quorum)", worst, failed)
	if failed > 5 {
		t.Fatalf("%d of 50 acquisitions failed with 3 of 5 nodes up", failed)
	}
	if bound := 2*nodeTimeout + 250*time.Millisecond; worst > bound {
		t.Fatalf("worst acquisition %v, want ≤ %v (two node timeouts + slack)", worst, bound)
	}
}

// TestReleaseWakesWaiterWithMinorityPaused: the merged subscription wakes a
// waiter on another store within a second of the release, although the
// holder's lease is a minute long and 2 of 5 nodes are paused (their
// subscriptions never confirm).
func TestReleaseWakesWaiterWithMinorityPaused(t *testing.T) {
	c := startCluster(t, 5)
	holder := newClient(t, c.store(t, faultOpts), dlock.WithTTL(time.Minute))
	waiter := newClient(t, c.independentStore(t, faultOpts), dlock.WithTTL(time.Minute), dlock.WithWait(20*time.Second))
	for _, s := range c.servers[3:] {
		s.Pause()
	}
	ctx := testCtx(t)
	l, err := holder.TryLock(ctx, "wake")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "wake")
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	// Wait until the waiter's subscription is confirmed on the live nodes.
	waitFor(t, 5*time.Second, "waiter subscribed", func() bool {
		for _, s := range c.servers[:3] {
			if r, err := s.Do("PUBSUB", "NUMSUB", "dlock:{wake}:released"); err != nil || !strings.HasSuffix(r, "\n1") {
				return false
			}
		}
		return true
	})
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		t.Logf("waiter acquired %v after the release", time.Since(released))
	case <-time.After(time.Second):
		t.Fatal("waiter not woken within 1s of the release (the holder's lease was a minute)")
	}
	for _, s := range c.servers[3:] {
		s.Resume() // before the stores close (see TestMinorityDownKeepsMutualExclusion)
	}
}
