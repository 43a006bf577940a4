package chaos_test

import (
	"context"
	"math/rand/v2"
	"path"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/faultproxy"
)

// The run of the read-write lock and semaphore traffic, shared by both:
// per store, the traffic over the real store, then the same traffic over
// the primitive's broken variant (the negative control), each on a key of
// its own of one server.

// famWorker is one worker of a traffic run.
type famWorker interface {
	step(ctx context.Context, rng *rand.Rand)
	close(ctx context.Context) error
}

// famEnv is what a worker of a run shares with the others.
type famEnv struct {
	rec     *famRec
	key     string // the key every worker contends for
	session bool   // famTarget.session: no expiry-only operation
	// waitMax bounds the waits the worker asks for; one read-write lock
	// operation in writeOneIn writes; patientWriters (famPace).
	waitMax        time.Duration
	writeOneIn     int
	patientWriters bool
	// late reports that the run's time is up: it goes on only because an
	// operation is missing; missing(op) that op was not made yet.
	late    func() bool
	missing func(op string) bool
}

// famSpec is a primitive's traffic test.
type famSpec struct {
	what string // the primitive, in RESULT lines
	// open makes a worker over client st.
	open func(st driver.Store, id int, env famEnv) (famWorker, error)
	// check counts the violations in a run's holdings, t.Logs them and
	// anything else the run shows, and returns them (0 passes).
	check func(t *testing.T, hs []check.Holding, counts map[string]int) int
	// ops are the operations every run must make; expiry those the session
	// stores do not. shown, if set, says whether the holdings show what
	// else check requires (readers sharing the key).
	ops, expiry []string
	shown       func([]check.Holding) bool
	// control names the negative control; broken makes its store.
	control string
	broken  func(driver.Store) driver.Store
	// offers reports whether a store has the primitive.
	offers func(driver.Store) bool
}

// required lists the operations a run on a store must make: ops, and
// expiry unless session.
func (spec famSpec) required(session bool) []string {
	if session {
		return spec.ops
	}
	return append(append([]string(nil), spec.ops...), spec.expiry...)
}

// runFamily runs spec's traffic and its control on each target, as
// subtests <target>/traffic and <target>/<control>, with seed s.
func runFamily(t *testing.T, targets []famTarget, spec famSpec, s uint64) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Logf("seed %d (DLOCK_CHAOS_SEED to replay); session store: %v", s, tg.session)
			newClient := tg.start(t)
			if st, _ := newClient(t); !spec.offers(st) {
				t.Fatalf("%s: a %T has no %s", tg.name, st, spec.what)
			}
			t.Run("traffic", func(t *testing.T) {
				hs, counts := runTraffic(t, tg, newClient, spec, s, false, func(st driver.Store) driver.Store { return st })
				if v := spec.check(t, hs, counts); v != 0 {
					t.Fatalf("seed %d: %d violations of the %s's invariant", s, v, spec.what)
				}
				for _, op := range spec.required(tg.session) {
					if counts[op] == 0 {
						t.Errorf("no %s in the traffic: it did not exercise it", op)
					}
				}
				for _, op := range spec.expiry {
					if n := counts[op]; tg.session && n != 0 {
						t.Errorf("%d of %s on a session store, which keeps no per-holding expiry", n, op)
					}
				}
			})
			t.Run(spec.control, func(t *testing.T) {
				hs, counts := runTraffic(t, tg, newClient, spec, s, true, spec.broken)
				if spec.check(t, hs, counts) == 0 {
					t.Fatalf("seed %d: %s made no violation: the checker cannot fail", s, spec.control)
				}
			})
		})
	}
}

// runTraffic runs 6 workers of spec over clients of newClient wrapped by
// wrap, at tg's pace (for the control's time if control), on a key named
// after t, and returns the phases recorded and the operations counted.
func runTraffic(t *testing.T, tg famTarget, newClient func(*testing.T) (driver.Store, *faultproxy.Proxy), spec famSpec, s uint64, control bool, wrap func(driver.Store) driver.Store) ([]check.Holding, map[string]int) {
	t.Helper()
	pace := tg.pace.with()
	d := pace.runFor
	if control {
		d = pace.controlFor
	}
	ctx := testCtx(t, d+time.Minute)
	rec, start := &famRec{}, time.Now()
	env := famEnv{
		rec: rec, key: "fam-" + path.Base(t.Name()), session: tg.session, waitMax: pace.waitMax, writeOneIn: pace.writeOneIn, patientWriters: pace.patientWriters,
		late:    func() bool { return time.Since(start) >= d },
		missing: func(op string) bool { _, counts := rec.result(); return counts[op] == 0 },
	}
	var proxies []*faultproxy.Proxy
	var ws []famWorker
	for i := range 6 {
		st, proxy := newClient(t)
		w, err := spec.open(wrap(st), i+1, env)
		if err != nil {
			t.Fatal(err)
		}
		proxies, ws = append(proxies, proxy), append(ws, w)
	}
	covered := func() bool {
		if control {
			return true
		}
		hs, counts := env.rec.result()
		for _, op := range spec.required(tg.session) {
			if counts[op] == 0 {
				return false
			}
		}
		return spec.shown == nil || spec.shown(hs)
	}
	runWorkers(ctx, s, d, pace, covered, proxies, func(ctx context.Context, i int, rng *rand.Rand) { ws[i].step(ctx, rng) })
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { _ = w.close(cctx) })
	}
	wg.Wait()
	return env.rec.result()
}
