package drivertest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the rate limiter suite about time: the refill, the race, the
// expiry of idle keys. Their bounds compare the store's clock with the
// test's: both advance at the same rate on one machine, and a lower bound
// taken from the test's clock before a call holds on the store's, which
// reads its clock after the call is sent.

// testRateRefill: once the burst is used, the next request is admitted
// no sooner than one interval after the first of the burst (the test
// reads its clock before sending it, the store after), and not much later;
// it takes the one request that came back, not another burst.
func (s *suite) testRateRefill(t *testing.T, m driver.RateLimiter) {
	iv := max(2*s.ttl, 300*time.Millisecond)
	key, lim := Key(t), driver.RateLimit{Rate: 1, Period: iv, Burst: 2}
	start := time.Now()
	if r := allowN(t, m, key, lim, 2); r.Allowed != 2 {
		t.Fatalf("the burst of a fresh key: %+v", r)
	}
	if r := allowN(t, m, key, lim, 1); r.Allowed != 0 || r.RetryAfter <= 0 || r.RetryAfter > iv {
		t.Fatalf("right after the burst: %+v, want denied, retry after (0, %v]", r, iv)
	}
	var r driver.RateResult
	var sent time.Duration // when the admitted request was sent, since the burst
	if !eventually(iv+s.slack, func() bool {
		sent = time.Since(start)
		r = allowN(t, m, key, lim, 1)
		return r.Allowed == 1
	}) {
		t.Fatalf("nothing admitted %v after the burst at one per %v", iv+s.slack, iv)
	}
	if at := time.Since(start); at < iv {
		t.Fatalf("a request was admitted %v after the burst began, before one interval (%v)", at, iv)
	}
	switch {
	case r.Remaining == 0:
	case r.Remaining == 1 && sent >= 2*iv:
		// Sent two intervals on (a stall of a loaded machine): two came
		// back, so one more is admitted before the denial below.
		if r = allowN(t, m, key, lim, 1); r.Allowed != 1 || r.Remaining != 0 {
			t.Fatalf("the second refilled request (%v after the burst): %+v, want admitted, Remaining 0", sent, r)
		}
	default:
		t.Fatalf("the request %v after the burst (one per %v): %+v, want Remaining 0", sent, iv, r)
	}
	if d := allowN(t, m, key, lim, 1); d.Allowed != 0 || d.RetryAfter > iv {
		t.Fatalf("after the refilled request: %+v, want denied within %v", d, iv)
	}
}

// The race's limit and length: 20 a second, a burst of 5, for a second.
var (
	rateRaceLimit  = driver.RateLimit{Rate: 20, Period: time.Second, Burst: 5}
	rateRaceWindow = time.Second
)

// testRateRace: Goroutines goroutines on each of Clients clients ask for 1
// or 2 of one key's budget as fast as they can for rateRaceWindow. The rule
// checked is the budget: the requests admitted (counted, all n of each)
// never exceed Burst plus one per interval of the time between the first
// call sent and the last answer received.
func (s *suite) testRateRace(t *testing.T, m driver.RateLimiter) {
	seed := uint64(time.Now().UnixNano())
	lim, iv := rateRaceLimit, rateRaceLimit.Interval()
	t.Logf("seed %d (%d clients × %d goroutines, limit %v, %v)", seed, s.h.Clients, s.h.Goroutines, lim, rateRaceWindow)
	clients := []driver.RateLimiter{m}
	for len(clients) < s.h.Clients {
		clients = append(clients, s.rateClient(t))
	}
	key := Key(t)
	var admitted, calls atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for c, cl := range clients {
		for g := range s.h.Goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*1000+g)))
			c := ctx(t)
			wg.Go(func() {
				for i := 0; i < 1_000_000 && time.Since(start) < rateRaceWindow; i++ {
					r, err := cl.AllowN(c, key, lim, 1+rng.IntN(2))
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					calls.Add(1)
					admitted.Add(int64(r.Allowed))
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("racer: %v", err)
	}
	most := int64(lim.Burst) + int64(elapsed/iv)
	t.Logf("%d of %d requests admitted in %v (at most %d)", admitted.Load(), calls.Load(), elapsed, most)
	if admitted.Load() > most {
		t.Fatalf("%d requests admitted in %v: more than the burst of %d plus one per %v (%d) (seed %d)", admitted.Load(), elapsed, lim.Burst, iv, most, seed)
	}
	if admitted.Load() <= int64(lim.Burst) {
		t.Fatalf("only %d admitted in %v of calls: not even the burst and one more (seed %d)", admitted.Load(), elapsed, seed)
	}
}

// testRateIdleExpires: a key's state is gone once its budget is full again
// (ResetAfter) and the store's retention has passed, and the key then
// admits a full burst; a key still refilling keeps its state (the
// control).
func (s *suite) testRateIdleExpires(t *testing.T, m driver.RateLimiter) {
	r, ok := driver.As[StateReporter](m)
	if !ok {
		t.Skip("store does not report its per-key state (drivertest.StateReporter)")
	}
	idle, busy := Key(t), Key(t)
	lim := driver.RateLimit{Rate: 1, Period: s.ttl, Burst: 2}
	res := allowN(t, m, idle, lim, 2)
	if res.Allowed != 2 || res.ResetAfter > 2*s.ttl {
		t.Fatalf("the burst: %+v, want admitted, reset within %v", res, 2*s.ttl)
	}
	allowN(t, m, busy, slowRate(2), 1)
	state := func(key string) int {
		n, err := r.KeyState(ctx(t), key)
		if err != nil {
			t.Fatalf("KeyState(%q): %v", key, err)
		}
		return n
	}
	if state(busy) == 0 {
		t.Fatal("KeyState of a key refilling for the next hour = 0; want some (control)")
	}
	if !eventually(2*s.ttl+r.Retention()+s.slack, func() bool { return state(idle) == 0 }) {
		t.Fatalf("%d entries left for a key idle for %v after its reset (%v) and the retention (%v)", state(idle), s.slack, res.ResetAfter, r.Retention())
	}
	// The expired key starts afresh under an hourly rate: with lim, a call
	// delayed past its period (150 ms, seen at load 8-19) refilled a token.
	fresh := slowRate(lim.Burst)
	if res := allowN(t, m, idle, fresh, 2); res.Allowed != 2 {
		t.Fatalf("an expired key: %+v, want its whole burst", res)
	}
	if res := allowN(t, m, idle, fresh, 1); res.Allowed != 0 {
		t.Fatalf("right after the burst of an expired key: %+v, want denied", res)
	}
}
