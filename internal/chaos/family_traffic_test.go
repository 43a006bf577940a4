package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/faultproxy"
)

// The read-write lock and semaphore traffic (rw_traffic_test.go,
// semaphore_traffic_test.go) share this kit, its run (family_run_test.go)
// and its stores (family_stores_test.go): every worker is an in-process
// Client with its own connection through its own fault proxy, which a fault
// goroutine resets, holds (replies delivered after the client gave up: lost
// replies), blackholes or slows at random; each holding the worker takes
// is tracked as the holder sees it, and the checkers of package check run
// over the phases recorded.

// famHolding is what the kit asks of an *dlock.RWHolding or *dlock.Permit.
type famHolding interface {
	ValidUntil() time.Time
	Done() <-chan struct{}
	Err() error
	Fence() uint64
	Extend(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
}

// famRec records the holdings' phases and counts the operations made.
type famRec struct {
	mu     sync.Mutex
	hs     []check.Holding
	ids    int
	counts map[string]int
}

func (r *famRec) count(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[op]++
}

func (r *famRec) add(h check.Holding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hs = append(r.hs, h)
}

func (r *famRec) id() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids++
	return r.ids
}

func (r *famRec) result() ([]check.Holding, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := map[string]int{}
	for k, v := range r.counts {
		c[k] = v
	}
	return append([]check.Holding(nil), r.hs...), c
}

// tracked is a holding being recorded: cur is its current phase.
type tracked struct {
	rec  *famRec
	h    famHolding
	cur  check.Holding
	dead bool

	mu     sync.Mutex
	doneAt time.Time // when Done was closed; zero before
}

// track starts recording h, acquired by a call made at invoke that
// returned at start.
func (r *famRec) track(client int, h famHolding, invoke, start time.Time, write bool, permits int, note string) *tracked {
	t := &tracked{rec: r, h: h, cur: check.Holding{
		ID: r.id(), Client: client, Write: write, Permits: permits, Fence: h.Fence(), Invoke: invoke, Start: start, Note: note,
	}}
	go func() {
		<-h.Done() // closed by the release, the loss, or Close at the end of the traffic
		t.mu.Lock()
		defer t.mu.Unlock()
		t.doneAt = time.Now()
	}()
	return t
}

// end closes the current phase at at, or at ValidUntil if that came first;
// why says how, for the report.
func (t *tracked) end(at time.Time, why string) {
	if vu := t.h.ValidUntil(); vu.Before(at) {
		at, why = vu, why+"(at ValidUntil)"
	}
	t.mu.Lock()
	if done := t.doneAt; !done.IsZero() && done.Before(at) {
		at, why = done, why+"(at Done)"
	}
	t.mu.Unlock()
	t.cur.End, t.cur.Note = at, t.cur.Note+" "+why
	t.rec.add(t.cur)
}

// alive reports whether the holder still takes the holding to be valid,
// and records its end if not.
func (t *tracked) alive() bool {
	if t.dead {
		return false
	}
	now := time.Now()
	if t.h.Err() == nil && now.Before(t.h.ValidUntil()) {
		return true
	}
	t.end(now, fmt.Sprintf("ended(err=%v)", t.h.Err()))
	t.dead = true
	return false
}

// phase ends the current phase now and starts one of mode write: call it
// just before a Downgrade. It returns false if the holding had ended.
func (t *tracked) phase(write bool) bool {
	if !t.alive() {
		return false
	}
	now := time.Now()
	note := t.cur.Note
	t.end(now, "phase-end")
	t.cur.Start, t.cur.Write, t.cur.Note = now, write, note+" downgraded:"

	return true
}

// release ends the holding's last phase at the release call and releases
// it.
func (t *tracked) release(ctx context.Context) {
	if t.alive() {
		t.end(time.Now(), "released")
		t.dead = true
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = t.h.Release(rctx)
}

// kill abandons the holding as a crashed holder would: no release, and
// (for a fixed lease) no renewal; it counts as valid until its
// ValidUntil.
func (t *tracked) kill() {
	if t.alive() {
		t.end(t.h.ValidUntil(), "killed")
		t.dead = true
	}
	t.rec.count("killed")
}

// work holds t for a few steps of 1–30 ms, extending it shorter (60–150
// ms) or longer (500–900 ms) than its lease at random unless session (a
// session store renews the session, whatever the ttl); between steps,
// between(i) may do more (a Downgrade). It returns false if the holding
// ended on the way.
func (t *tracked) work(ctx context.Context, rng *rand.Rand, session bool, between func(i int)) bool {
	for i := range 1 + rng.IntN(3) {
		if !t.alive() {
			return false
		}
		time.Sleep(time.Duration(1+rng.IntN(30)) * time.Millisecond) // work inside the holding
		ectx, cancel := context.WithTimeout(ctx, time.Second)
		switch op := rng.IntN(5); {
		case session && op < 2:
			between(i)
		case op == 0:
			t.rec.count("extend-shorter")
			t.extend(ectx, time.Duration(60+rng.IntN(90))*time.Millisecond)
		case op == 1:
			t.rec.count("extend-longer")
			t.extend(ectx, time.Duration(500+rng.IntN(400))*time.Millisecond)
		default:
			between(i)
		}
		cancel()
	}
	return t.alive()
}

// extend extends the holding and notes the call, its outcome and the
// validity it left, in ms since famEpoch.
func (t *tracked) extend(ctx context.Context, ttl time.Duration) {
	s := time.Now()
	err := t.h.Extend(ctx, ttl)
	t.cur.Note += fmt.Sprintf(" extend(%v %s..%s err=%v vu=%s)", ttl, sinceEpoch(s), sinceEpoch(time.Now()), err, sinceEpoch(t.h.ValidUntil()))
}

// famEpoch is the origin of the times in notes and reports.
var famEpoch = time.Now()

func sinceEpoch(at time.Time) string {
	return fmt.Sprintf("%.1f", float64(at.Sub(famEpoch).Microseconds())/1000)
}

// injectFaults cuts, holds, drops or slows proxy's traffic at random while
// more reports true, one fault at a time, pace.faultGap to 6 times that
// apart, and leaves it clear. With pace.noCuts it only holds and slows.
func injectFaults(proxy *faultproxy.Proxy, rng *rand.Rand, pace famPace, more func() bool) {
	gap := pace.faultGap
	defer proxy.Clear()
	span := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond }
	for more() {
		time.Sleep(gap + time.Duration(rng.Int64N(int64(5*gap)))) // time between faults
		kind := rng.IntN(4)
		if pace.noCuts {
			kind = 1 + 2*rng.IntN(2) // hold or slow
		}
		switch kind {
		case 0:
			proxy.ResetAll()
		case 1: // replies delivered after the client's 300 ms read timeout: lost
			release := proxy.Hold(faultproxy.Downstream)
			time.Sleep(span(100, 450))
			release()
		case 2:
			proxy.Blackhole(faultproxy.Downstream, true)
			time.Sleep(span(50, 300))
			proxy.Blackhole(faultproxy.Downstream, false)
		case 3:
			proxy.SetDelay(faultproxy.Downstream, span(20, 80))
			time.Sleep(span(100, 300))
			proxy.SetDelay(faultproxy.Downstream, 0)
		}
	}
}

// runWorkers runs step for each of n workers until d passes, and on until
// covered reports true or 2×d passes (at most 500 steps each), with a fault
// goroutine per worker's proxy (none for a nil one; faults of the kinds
// pace allows, pace.faultGap to 6 times that apart) while the steps go on,
// think time of 1–10 ms between steps.
func runWorkers(ctx context.Context, s uint64, d time.Duration, pace famPace, covered func() bool, proxies []*faultproxy.Proxy, step func(ctx context.Context, w int, rng *rand.Rand)) {
	start := time.Now()
	more := func() bool {
		at := time.Since(start)
		return at < d || at < 2*d && !covered()
	}
	var wg sync.WaitGroup
	for i, p := range proxies {
		if p != nil {
			frng := rand.New(rand.NewPCG(s, uint64(1000+i)))
			wg.Go(func() { injectFaults(p, frng, pace, more) })
		}
		rng := rand.New(rand.NewPCG(s, uint64(i)))
		wg.Go(func() {
			for n := 0; n < 500 && more(); n++ {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				step(sctx, i, rng)
				cancel()
				time.Sleep(time.Duration(1+rng.IntN(10)) * time.Millisecond) // think time
			}
		})
	}
	wg.Wait()
}
