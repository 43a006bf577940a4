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
)

// semLimit is the limit, N, of the key every worker takes permits of.
const semLimit = 3

// semWorker is one semaphore-traffic client.
type semWorker struct {
	famEnv
	id int
	s  *dlock.Semaphores
}

func (w *semWorker) close(ctx context.Context) error { return w.s.Close(ctx) }

// step takes k ∈ {1, 2} permits with Acquire (a wait of up to 800 ms, or
// one cancelled after 2–40 ms) or TryAcquire, works inside them (Extend
// shorter and longer, but not on a session store), then releases them or,
// for a fixed lease one time in five, kills the holder (not on a session
// store either).
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
		p, err = w.s.TryAcquire(actx, w.key, semLimit, k, opt)
	} else {
		p, err = w.s.Acquire(actx, w.key, semLimit, k, opt, dlock.WithWait(time.Duration(rng.Int64N(int64(w.waitMax)))))
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
	t.work(ctx, rng, w.session, func(int) {})
	if fixed && !w.session && rng.IntN(5) == 0 {
		t.kill()
		return
	}
	t.release(ctx)
}

// limitIgnored is the negative control: it stores ten times the limit, so
// the store lets out more permits than the callers' N.
type limitIgnored struct{ driver.Semaphore }

// Unwrap returns the store, whose notifications the waits still use.
func (s limitIgnored) Unwrap() driver.Store { return s.Semaphore }

func (s limitIgnored) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	return s.Semaphore.AcquirePermits(ctx, key, token, 10*n, k, ttl)
}

// semSpec is the semaphore's traffic.
var semSpec = famSpec{
	what: "semaphore",
	open: func(st driver.Store, id int, env famEnv) (famWorker, error) {
		s, err := dlock.NewSemaphores(st.(driver.Semaphore))
		return &semWorker{famEnv: env, id: id, s: s}, err
	},
	check:   checkSem,
	ops:     []string{"permits-1", "permits-2", "refused", "cancelled"},
	expiry:  []string{"extend-shorter", "extend-longer", "killed"},
	control: "control-limit-ignored",
	broken:  func(st driver.Store) driver.Store { return limitIgnored{st.(driver.Semaphore)} },
	offers:  func(st driver.Store) bool { _, ok := st.(driver.Semaphore); return ok },
}

// checkSem counts the instants at which the permits out exceed the limit
// and the fence inversions, and logs them with the first excesses.
func checkSem(t *testing.T, hs []check.Holding, counts map[string]int) int {
	over, inv := check.PermitsOver(hs, semLimit), check.FenceInversions(hs, false)
	t.Logf("RESULT %s holdings=%d %v over-limit=%d fence-inversions=%d", t.Name(), len(hs), counts, over, inv)
	logExcess(t, hs, semLimit, 2)
	return over + inv
}

// R38. Invariant: semaphore traffic on every store that has the primitive
// (semTargets), under connection resets, held (lost) and dropped replies,
// never lets the permits of the holdings their holders take to be valid
// exceed the limit N = 3 at any instant, and fences follow real-time
// order. The traffic takes k ∈ {1, 2} permits with Acquire, TryAcquire and
// waits cancelled after 2–40 ms and, on the stores with per-holding
// leases, extends shorter and longer than the lease and kills holders
// (fixed lease, never released). Pass: zero violations. Negative control:
// control-limit-ignored, a store that stores ten times the limit, must
// exceed it.
func TestSemaphoreTrafficZeroViolations(t *testing.T) {
	runFamily(t, semTargets, semSpec, composedSeed())
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
