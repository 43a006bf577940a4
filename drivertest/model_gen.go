package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock"
)

// The generator of the model case: a run is a few actors (owners) that
// take one key concurrently, each running blocks of operations drawn from
// its own random source, seeded from the run's seed: Lock, TryLock and Do,
// nested to random depth under the holding's owner (ContextWithOwner or
// Do's context) or without one; Extend shorter and longer than the lease;
// fixed leases (WithTTL) that may run out, renewed ones (WithAutoRenew)
// with different periods, the default lease; Release with a live or an
// ended context; waits cancelled by their context or bound; lost requests
// and replies (faultStore); Close. A prober on a client of its own tries
// the key every few milliseconds and holds it briefly when it gets it.
// The seed fixes the operations, not their timing: a replay
// (DLOCK_MODEL_SEED) runs the same program against the same store, and
// usually, not always, meets the same interleaving.

// maxDepth bounds the nesting of holdings in one actor.
const maxDepth = 3

// maxBlocks bounds the blocks one actor runs (the run's time bounds them
// first).
const maxBlocks = 200

// modelRun is one generated run on one key.
type modelRun struct {
	s     *suite
	key   string
	seed  uint64
	check *modelCheck
	until time.Time // actors start no block after it
	// outlast counts the steps left that wait for a fixed lease to run
	// out: few on a session store, where each costs a session TTL.
	outlast atomic.Int32
}

// actor is one owner of the run, on one goroutine.
type actor struct {
	r      *modelRun
	name   string
	cl     *dlock.Client
	fs     *faultStore
	base   context.Context // with an Owner if owned
	owned  bool
	faulty bool // arms faults on Acquire and on its Release (own client: no other actor's call takes them)
	own    bool // the client is the actor's alone: it may Close it
	rnd    *rand.Rand
	closed bool
	last   bool // the last block: its outermost holding has the default lease
}

// ttl returns the run's short lease.
func (a *actor) ttl() time.Duration { return a.r.s.ttl }

// leaseOpt draws the lease of an acquisition: its option, a description,
// its length on the store and whether it is fixed.
func (a *actor) leaseOpt() ([]dlock.Option, string, time.Duration, bool) {
	m := a.r.s.model
	k := a.rnd.IntN(10)
	switch {
	case k == 0 || a.last:
		a.last = false
		return nil, "default lease", m.TTLFor(dlock.DefaultLease), false
	case k < 5:
		d := a.ttl() * time.Duration([]int{1, 2, 4}[a.rnd.IntN(3)])
		return []dlock.Option{dlock.WithAutoRenew(d)}, fmt.Sprintf("WithAutoRenew(%v)", d), m.TTLFor(d), false
	default:
		d := a.ttl() * time.Duration([]int{1, 2, 3, 6}[a.rnd.IntN(4)])
		return []dlock.Option{dlock.WithTTL(d)}, fmt.Sprintf("WithTTL(%v)", d), m.TTLFor(d), true
	}
}

// waitBound draws how long a Lock or Do waits.
func (a *actor) waitBound() time.Duration {
	return a.ttl() * time.Duration([]int{0, 1, 2, 5}[a.rnd.IntN(4)]) / 2
}

// arm draws a fault for the next call of kind k (Acquire and Release:
// faulty actors only; Extend: any actor).
func (a *actor) arm(k faultKind) {
	if (k != faultExtend && !a.faulty) || a.rnd.IntN(8) != 0 {
		return
	}
	m := faultMode(1 + a.rnd.IntN(2))
	a.fs.arm(k, m)
	a.r.check.logf("%s: armed %v for the next %s", a.name, m, [...]string{"Acquire", "Extend", "Release"}[k])
}

// run runs blocks until the run's time is up or the client is closed,
// then a last one with the default lease (a long one on a per-key store):
// a holding of it that the store does not free when it ends keeps the key
// for longer than invariant (2) allows.
func (a *actor) run() {
	for i := 0; i < maxBlocks && !a.closed && time.Now().Before(a.r.until); i++ {
		a.block(a.base, 0)
		a.sleep(time.Duration(a.rnd.Int64N(int64(a.ttl()) / 2)))
	}
	if !a.closed {
		a.last = true
		a.block(a.base, 0)
	}
}

// block takes the key once, by Do, Lock or TryLock, holds it for a body
// of random steps and gives it back.
func (a *actor) block(ctx context.Context, depth int) {
	last := a.last
	opts, desc, _, fixed := a.leaseOpt()
	owned := depth > 0 || a.owned
	op := a.rnd.IntN(4)
	if last {
		op = 2 // Lock, with a wait long enough to get the key
	}
	switch op {
	case 0:
		a.do(ctx, depth, opts, desc, fixed)
		return
	case 1:
		a.arm(faultAcquire)
		desc = "TryLock(" + desc + ")"
		l, err := a.cl.TryLock(ctx, a.r.key, opts...)
		a.hold(ctx, depth, l, err, desc, owned, fixed, false)
	default:
		a.arm(faultAcquire)
		wait := a.waitBound()
		if last {
			wait = 10 * a.ttl()
		}
		desc = fmt.Sprintf("Lock(%s, wait %v)", desc, wait)
		wctx, cancel := context.WithTimeout(ctx, wait) // a wait cancelled by its context
		l, err := a.cl.Lock(wctx, a.r.key, opts...)
		cancel()
		a.hold(ctx, depth, l, err, desc, owned, fixed, last)
	}
}

// do runs a body under Do.
func (a *actor) do(ctx context.Context, depth int, opts []dlock.Option, desc string, fixed bool) {
	name := fmt.Sprintf("%s/d%d Do(%s)", a.name, depth, desc)
	opts = append(opts, dlock.WithWait(a.waitBound()))
	err := a.cl.Do(ctx, a.r.key, func(fctx context.Context) error {
		l, _ := dlock.LeaseFromContext(fctx)
		w := a.r.check.acquired(name, l, depth > 0 || a.owned, fixed)
		a.body(fctx, w, depth)
		return nil
	}, opts...)
	a.r.check.logf("%s: returned %v", name, err)
}

// hold runs a body under a lease from Lock or TryLock and releases it.
// The actor's last holding has no body: nothing else of its owner sets
// the key's expiry after it, so its release alone must free the key.
func (a *actor) hold(ctx context.Context, depth int, l *dlock.Lease, err error, desc string, owned, fixed, last bool) {
	name := fmt.Sprintf("%s/d%d %s", a.name, depth, desc)
	if err != nil {
		a.r.check.logf("%s: %v", name, err)
		return
	}
	w := a.r.check.acquired(name, l, owned, fixed)
	if last {
		a.sleep(time.Duration(a.rnd.Int64N(int64(a.ttl()))))
	} else {
		a.body(ctx, w, depth)
	}
	a.release(w)
}

// body runs 1 to 4 random steps under w; ctx carries w's owner (for a
// nested Lock without an Owner, the nested call waits for itself and its
// wait ends unfulfilled).
func (a *actor) body(ctx context.Context, w *watched, depth int) {
	n := 1 + a.rnd.IntN(4)
	for i := 0; i < n && !a.closed; i++ {
		a.r.check.observe(w)
		switch k := a.rnd.IntN(20); {
		case k < 6:
			a.sleep(time.Duration(a.rnd.Int64N(int64(2 * a.ttl()))))
		case k < 12 && depth < maxDepth:
			a.block(ctx, depth+1)
		case k < 17:
			a.extend(ctx, w)
		case k < 19:
			a.outlast(w)
		default:
			a.close()
		}
	}
	a.r.check.observe(w)
}

// extend extends w to a random length, shorter or longer than its lease.
func (a *actor) extend(ctx context.Context, w *watched) {
	d := max(a.ttl()*time.Duration([]int{1, 2, 6, 16}[a.rnd.IntN(4)])/2, a.r.s.model.MinTTL, dlock.MinTTL)
	a.arm(faultExtend)
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := w.l.Extend(ectx, d)
	cancel()
	a.r.check.logf("%s: Extend(%v): %v, valid for %v", w.who, d, err, time.Until(w.l.ValidUntil()).Round(time.Millisecond))
	if err == nil && a.rnd.IntN(2) == 0 {
		a.sleep(time.Duration(a.rnd.Int64N(int64(d)))) // work for part of the extension
	}
}

// outlast waits for a fixed lease to run out (a bounded number of times on
// a session store, where that takes a session TTL).
func (a *actor) outlast(w *watched) {
	if !w.fixed || w.l.Err() != nil {
		return
	}
	if a.r.s.model.Session && a.r.outlast.Add(-1) < 0 {
		return
	}
	a.r.check.logf("%s: waiting for the fixed lease to run out (%v left)", w.who, w.l.Remaining().Round(time.Millisecond))
	bound := time.NewTimer(min(w.l.Remaining()+a.r.s.slack, time.Minute))
	defer bound.Stop()
	select {
	case <-w.l.Done():
	case <-bound.C: // renewed meanwhile by an Extend? it is not: fixed leases are not renewed
	}
}

// close closes the actor's client, if it is the actor's alone.
func (a *actor) close() {
	if !a.own || a.rnd.IntN(3) != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.cl.Close(ctx)
	a.closed = true
	a.r.check.logf("%s: Close: %v", a.name, err)
}

// release releases w with a live context or, one time in five, one that
// has already ended.
func (a *actor) release(w *watched) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ended := a.rnd.IntN(5) == 0
	if ended {
		cancel()
		a.r.check.logf("%s: releasing with an ended context", w.who)
	}
	a.arm(faultRelease)
	valid := a.r.check.observe(w)
	err := w.l.Release(ctx)
	if ended && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w (context ended)", err)
	}
	a.r.check.released(w, valid, err)
}

// sleep pauses the actor (work under the lock, or between blocks).
func (a *actor) sleep(d time.Duration) {
	time.Sleep(d)
}

// probe tries the key every few milliseconds from its own client until
// stop is closed, holding it briefly when it gets it; it returns how many
// times it got it. Bounded in count as well as by the run.
func (r *modelRun) probe(cl *dlock.Client, rnd *rand.Rand, stop <-chan struct{}) int {
	got := 0
	for i := 0; i < 20000; i++ {
		select {
		case <-stop:
			return got
		case <-time.After(time.Duration(5+rnd.IntN(15)) * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := cl.TryLock(ctx, r.key, dlock.WithTTL(r.s.ttl))
		if err == nil {
			got++
			w := r.check.acquired(fmt.Sprintf("probe#%d", got), l, false, true)
			time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
			r.check.observe(w)
			r.check.released(w, r.check.observe(w), l.Release(ctx))
		}
		cancel()
	}
	return got
}

// runActors runs the actors and the prober until every actor is done.
func (r *modelRun) runActors(actors []*actor, prober *dlock.Client) int {
	var wg sync.WaitGroup
	for _, a := range actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run()
		}()
	}
	stop := make(chan struct{})
	probes := make(chan int, 1)
	go func() { probes <- r.probe(prober, rand.New(rand.NewPCG(r.seed, 99)), stop) }()
	wg.Wait()
	close(stop)
	return <-probes
}
