package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/redisstore"
)

const (
	semKey   = "sem-chaos" // the semaphore every worker takes permits of
	semLimit = 3           // its limit, N
)

// semWorker is one semaphore-traffic client.
type semWorker struct {
	id  int
	s   *dlock.Semaphores
	rec *famRec
}

// step takes k ∈ {1, 2} permits with Acquire (a wait of up to 800 ms, or
// one cancelled after 2–40 ms) or TryAcquire, works inside them (Extend
// shorter and longer), then releases them or, for a fixed lease one time
// in five, kills the holder.
func (w *semWorker) step(ctx context.Context, rng *rand.Rand) {
	k := 1 + rng.IntN(2)
	opt, fixed := lease(rng)
	how := rng.IntN(4)
	actx, cancel := ctx, context.CancelFunc(func() {})
	if how == 0 {
		actx, cancel = context.WithTimeout(ctx, time.Duration(2+rng.IntN(38))*time.Millisecond)
	}
	defer cancel()
	invoke := time.Now()
	var p *dlock.Permit
	var err error
	if how == 1 {
		p, err = w.s.TryAcquire(actx, semKey, semLimit, k, opt)
	} else {
		p, err = w.s.Acquire(actx, semKey, semLimit, k, opt, dlock.WithWait(time.Duration(rng.IntN(800))*time.Millisecond))
	}
	switch {
	case err != nil && how == 0:
		w.rec.count("cancelled")
		return
	case err != nil:
		w.rec.count("refused")
		return
	}
	w.rec.count(fmt.Sprintf("permits-%d", k))
	t := w.rec.track(w.id, p, invoke, time.Now(), false, k, fmt.Sprintf("acquire(how=%d fixed=%v)", how, fixed))
	t.work(ctx, rng, func(int) {})
	if fixed && rng.IntN(5) == 0 {
		t.kill()
		return
	}
	t.release(ctx)
}

// limitIgnored is the negative control: it stores ten times the limit, so
// the store lets out more permits than the callers' N.
type limitIgnored struct{ *redisstore.Store }

func (s limitIgnored) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	return s.Store.AcquirePermits(ctx, key, token, 10*n, k, ttl)
}

// runSemTraffic runs 6 semaphore workers for d over stores made by wrap
// and returns the holdings recorded and the operations counted.
func runSemTraffic(t *testing.T, s uint64, d time.Duration, wrap func(*redisstore.Store) driver.Semaphore) ([]check.Holding, map[string]int) {
	t.Helper()
	srv, _ := newRedis(t)
	ctx := testCtx(t, d+time.Minute)
	var rec famRec
	var proxies []*faultproxy.Proxy
	var ws []*semWorker
	for i := range 6 {
		store, proxy := famClient(t, srv.Addr())
		sem, err := dlock.NewSemaphores(wrap(store))
		if err != nil {
			t.Fatal(err)
		}
		proxies, ws = append(proxies, proxy), append(ws, &semWorker{id: i + 1, s: sem, rec: &rec})
	}
	runWorkers(ctx, s, d, proxies, func(ctx context.Context, i int, rng *rand.Rand) { ws[i].step(ctx, rng) })
	for _, w := range ws {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_ = w.s.Close(cctx)
		cancel()
	}
	return rec.result()
}

// R38. Invariant: semaphore traffic on Redis under connection resets, held
// (lost) and dropped replies never lets the permits of the holdings their
// holders take to be valid exceed the limit N = 3 at any instant, and
// fences follow real-time order. The traffic takes k ∈ {1, 2} permits with
// Acquire, TryAcquire and waits cancelled after 2–40 ms, extends shorter
// and longer than the lease, and kills holders (fixed lease, never
// released). Pass: zero violations. Negative control:
// control-limit-ignored, a store that stores ten times the limit, must
// exceed it.
func TestSemaphoreTrafficZeroViolations(t *testing.T) {
	s := composedSeed()
	d := 3 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	t.Run("redis", func(t *testing.T) {
		t.Logf("seed %d (DLOCK_CHAOS_SEED to replay)", s)
		hs, counts := runSemTraffic(t, s, d, func(st *redisstore.Store) driver.Semaphore { return st })
		over, inv := check.PermitsOver(hs, semLimit), check.FenceInversions(hs, false)
		t.Logf("RESULT semaphore seed=%d holdings=%d %v over-limit=%d fence-inversions=%d", s, len(hs), counts, over, inv)
		logExcess(t, hs, semLimit, 2)
		if over != 0 || inv != 0 {
			t.Fatalf("seed %d: permits over the limit %d times, %d fence inversions", s, over, inv)
		}
		for _, op := range []string{"permits-1", "permits-2", "refused", "cancelled", "killed", "extend-shorter", "extend-longer"} {
			if counts[op] == 0 {
				t.Errorf("no %s in the traffic: it did not exercise it", op)
			}
		}
	})
	t.Run("control-limit-ignored", func(t *testing.T) {
		hs, counts := runSemTraffic(t, s, d, func(st *redisstore.Store) driver.Semaphore { return limitIgnored{st} })
		over := check.PermitsOver(hs, semLimit)
		t.Logf("RESULT semaphore-control seed=%d holdings=%d %v over-limit=%d", s, len(hs), counts, over)
		if over == 0 {
			t.Fatalf("seed %d: a store that ignores the limit never exceeded it: the checker cannot fail", s)
		}
	})
}

// logExcess logs, for the first few holdings at whose start the permits
// out exceed the limit, the holdings then valid.
func logExcess(t *testing.T, hs []check.Holding, limit, max int) {
	for _, h := range hs {
		sum, in := 0, []check.Holding(nil)
		for _, o := range hs {
			if !o.Start.After(h.Start) && h.Start.Before(o.End) {
				sum, in = sum+o.Permits, append(in, o)
			}
		}
		if sum <= limit {
			continue
		}
		t.Logf("%d permits out at the start of holding %d:", sum, h.ID)
		for _, o := range in {
			t.Logf("  %s permits=%d", phaseString(o), o.Permits)
		}
		if max--; max == 0 {
			return
		}
	}
}
