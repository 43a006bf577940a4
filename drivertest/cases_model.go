package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// The model-based case (issue 23): generated runs of several owners on one
// key through package dlock's Client (model_gen.go), checked against two
// invariants:
//
//  1. while any lease reports itself valid, no other owner holds the key
//     (the store's record outlives every valid lease; model_check.go);
//  2. once every holding of the key has ended and the give-back bound has
//     passed, the key is free (wantFreeAfter).
//
// Its size is set by the environment, for a longer run than CI's:
//
//	DLOCK_MODEL_TIME=10m  runs until that much time is spent (default 8s)
//	DLOCK_MODEL_RUNS=500  runs exactly that many generated runs instead
//	DLOCK_MODEL_SEED=n    replays the run of seed n (printed by every run)
//	DLOCK_MODEL_TRACE=1   prints every run's trace, not only a failed one's
//
// e.g. DLOCK_MODEL_TIME=10m go test -run 'TestConformance/Mutex/ModelRandomHoldings' ./redisstore
// (go test's -timeout must cover it).

// giveBackBound is how long after a holding ends without a confirmed
// release (a release with an ended context, a lost reply, a fixed lease
// that ran out under an outer one) the Client may take to give the key
// back in the background: a few retries. Invariant (2) allows it plus the
// harness's slack.
const giveBackBound = 2 * time.Second

// defaultModelTime is the default budget of the generated runs; the
// deterministic cases and the last run's wind-down come on top.
const defaultModelTime = 8 * time.Second

// modelPlan is how many runs to make, from which seed.
type modelPlan struct {
	seed   uint64
	runs   int           // exact count, if > 0
	budget time.Duration // else: runs until this is spent
}

func modelPlanFromEnv(t *testing.T) modelPlan {
	p := modelPlan{seed: rand.Uint64() >> 16, budget: defaultModelTime}
	if v := os.Getenv("DLOCK_MODEL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DLOCK_MODEL_SEED=%q: %v", v, err)
		}
		return modelPlan{seed: n, runs: 1}
	}
	if v := os.Getenv("DLOCK_MODEL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DLOCK_MODEL_RUNS=%q: want a positive count", v)
		}
		p.runs = n
	}
	if v := os.Getenv("DLOCK_MODEL_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("DLOCK_MODEL_TIME=%q: want a positive duration", v)
		}
		p.budget = d
	}
	return p
}

// more reports whether run i is to be made, after spent.
func (p modelPlan) more(i int, spent time.Duration) bool {
	if p.runs > 0 {
		return i < p.runs
	}
	return i < 2 || spent < p.budget
}

// testModelRuns: generated runs of Lock, TryLock, Do, Extend, renewal,
// fixed leases, Release, cancelled waits, lost replies and Close by
// several owners on one key never make two holders within validity and
// always leave the key free (see the top of this file).
func (s *suite) testModelRuns(t *testing.T, _ driver.Mutex) {
	p := modelPlanFromEnv(t)
	start := time.Now()
	i := 0
	for ; p.more(i, time.Since(start)); i++ {
		seed := p.seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { s.modelRun(t, seed) })
	}
	t.Logf("%d runs in %v (DLOCK_MODEL_TIME or DLOCK_MODEL_RUNS for more)", i, time.Since(start).Round(time.Millisecond))
}

// modelClient returns a dlock.Client on a new client of the store, behind
// a faultStore.
func (s *suite) modelClient(t *testing.T) (*dlock.Client, *faultStore) {
	t.Helper()
	fs := &faultStore{inner: s.client(t)}
	cl, err := dlock.New(fs)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return cl, fs
}

// modelRun makes one generated run from seed and checks both invariants.
func (s *suite) modelRun(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 0))
	r := &modelRun{s: s, key: Key(t), seed: seed, check: newModelCheck()}
	if s.model.Session && rnd.IntN(2) == 0 {
		r.outlast.Store(1)
	}
	actors := s.modelActors(t, r, rnd)
	prober, pfs := s.modelClient(t)
	r.until = time.Now().Add(min(max(10*s.ttl, time.Second), 3*time.Second))
	t.Logf("seed %d (replay: DLOCK_MODEL_SEED=%d): key %q, actors %v", seed, seed, r.key, names(actors))
	probes := r.runActors(actors, prober)
	for _, w := range r.check.live() {
		t.Errorf("seed %d: %s: lease still valid after its actor finished", seed, w.who)
	}
	s.wantFreeAfter(t, r, pfs.inner)
	found := r.check.finish()
	for i, v := range found {
		if i == 10 {
			t.Errorf("seed %d: … and %d more violations", seed, len(found)-i)
			break
		}
		t.Errorf("seed %d: invariant 1: %s", seed, v)
	}
	closeClients(t, actors, prober)
	t.Logf("seed %d: %d violations of invariant 1; the prober got the key %d times", seed, len(found), probes)
	if t.Failed() || os.Getenv("DLOCK_MODEL_TRACE") != "" {
		t.Logf("seed %d: trace (replay: DLOCK_MODEL_SEED=%d):\n%s", seed, seed, r.check.report(120))
	}
}

// modelActors draws the run's actors: 2 or 3 owners, the second one
// sharing the first one's Client half of the time, each with or without an
// Owner; some of those with a Client of their own are faulty.
func (s *suite) modelActors(t *testing.T, r *modelRun, rnd *rand.Rand) []*actor {
	n := 2 + rnd.IntN(2)
	share := rnd.IntN(2) == 0
	var actors []*actor
	for i := range n {
		a := &actor{r: r, rnd: rand.New(rand.NewPCG(r.seed, uint64(i+1))), base: context.Background()}
		a.owned = rnd.IntN(3) != 0
		if i == 1 && share {
			a.cl, a.fs = actors[0].cl, actors[0].fs
		} else {
			a.cl, a.fs = s.modelClient(t)
			a.own = !(i == 0 && share)
			a.faulty = a.own && rnd.IntN(3) == 0
		}
		if a.owned {
			a.base = dlock.ContextWithOwner(a.base, dlock.NewOwner())
		}
		a.name = fmt.Sprintf("a%d[owner=%v faulty=%v own-client=%v]", i, a.owned, a.faulty, a.own)
		actors = append(actors, a)
	}
	return actors
}

func names(actors []*actor) []string {
	var ns []string
	for _, a := range actors {
		ns = append(ns, a.name)
	}
	return ns
}

// closeClients closes the run's Clients (each once).
func closeClients(t *testing.T, actors []*actor, prober *dlock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[*dlock.Client]bool{}
	for _, cl := range append([]*dlock.Client{prober}, clientsOf(actors)...) {
		if seen[cl] {
			continue
		}
		seen[cl] = true
		if err := cl.Close(ctx); err != nil {
			t.Logf("Close: %v", err)
		}
	}
}

func clientsOf(actors []*actor) []*dlock.Client {
	var cs []*dlock.Client
	for _, a := range actors {
		cs = append(cs, a.cl)
	}
	return cs
}

// wantFreeAfter checks invariant (2) for the run: every holding ended, so
// a new owner gets the key within the give-back bound plus the slack. That
// includes the holds an Owner's lost replies left (a lost acquisition's
// ghost hold, a lost release): the Client gives them back once the owner's
// last live holding of the key ended.
func (s *suite) wantFreeAfter(t *testing.T, r *modelRun, m driver.Mutex) {
	t.Helper()
	bound := giveBackBound + s.slack
	start := time.Now()
	if tok := s.acquiredWithin(t, m, r.key, bound); tok != "" {
		r.check.logf("invariant 2: key free after %v", time.Since(start).Round(time.Millisecond))
		mustRelease(t, m, r.key, tok)
		return
	}
	t.Errorf("seed %d: invariant 2: every holding of the key ended, yet it is still held %v later (bound %v): %s",
		r.seed, time.Since(start).Round(time.Millisecond), bound, s.keyState(t, m, r.key, r.check))
}

// keyState describes key's state in the store, naming the run's lease
// that holds it if any, for a failure message.
func (s *suite) keyState(t *testing.T, m driver.Mutex, key string, c *modelCheck) string {
	in, ok := driver.As[driver.Inspector](m)
	if !ok {
		return "the store cannot say more (no driver.Inspector)"
	}
	info, err := in.Inspect(ctx(t), key)
	if err != nil {
		return fmt.Sprintf("Inspect: %v", err)
	}
	state := fmt.Sprintf("Inspect: held %v, holds %d, fence %d, remaining %v",
		info.Held, info.Holds, info.Fence, info.Remaining.Round(time.Millisecond))
	if c == nil || !info.Held {
		return state
	}
	holder := "not matched to a lease of this run"
	c.mu.Lock()
	for _, w := range c.leases {
		if w.l.Token() == info.Token {
			holder = w.who + " (its owner's last lease)"
		}
	}
	c.mu.Unlock()
	return state + "; holder: " + holder
}
